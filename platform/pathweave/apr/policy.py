"""The APR selector policy: which selection action each channel gets, learned with DPO.

AutoPrunedRetriever chooses per channel (facts, earlier questions, earlier answers) one
action of ``include_all | unique | not_include`` (APR paper §2.5). Which one is right
depends on the query and the budget, so a small categorical policy pi_theta(y | x) picks
them (APR paper §2.8 "Adaptive compression via DPO"; spec §3 "Selector policy (DPO)"):

- features x (:func:`feature_vector`): the query embedding (384-d MiniLM, L2-normalized),
  log1p(query tokens) / 10 and log1p(token budget) / 10 (0 = no budget);
- the policy: an MLP (one hidden ReLU layer) with one categorical head per channel over the
  three actions; a combination y = (a_facts, a_questions, a_answers) has
  log pi(y | x) = sum of the three heads' log-probabilities;
- utility U(x, y) = alpha x accuracy - beta_tokens x prompt tokens - gamma x latency (ms),
  measured offline for all 27 combinations of a query (:mod:`pathweave.apr.examples`);
- preference pairs (:func:`preference_pairs`): the paper forms (x, y+, y-) "whenever
  U(x, y+) > U(x, y-)"; by default we keep the pairs of that set whose y+ is the best
  combination of the query (best vs every strictly worse one, ties by ``min_margin``), which
  is what the policy is used for (its argmax); ``pairs = "all"`` keeps the whole set;
- DPO loss (:func:`dpo_loss`): -log sigmoid(beta x ((lp+ - lp-) - (lp_ref+ - lp_ref-))), beta
  = 0.1 on both the policy and the reference log-ratio (the reference code scales only the
  policy term: not done here);
- the reference policy is the frozen initial policy (the paper: "a fixed reference policy").
  The heads start at zero, so a fresh policy and its reference are the uniform policy over
  the 27 combinations; training on from a saved policy keeps that policy as the reference.
- AdamW, lr 3e-4, 5 epochs (section ``selector`` of the settings); seeded, so deterministic.

The trained policy is one safetensors file (weights + JSON metadata in its header):
:meth:`SelectorPolicy.save` / :meth:`SelectorPolicy.load`. :func:`load_selector` gives the
configured policy, or ``unique`` on every channel (:data:`FALLBACK_ACTIONS`) when none is
configured or the file fails to load (logged); mode ``apr`` calls :func:`choose_actions` when
its caller names no actions. Measured figures and a known limit (independent heads, a
utility that is not additive over the channels): ``docs/selector.md``.
"""

from __future__ import annotations

import copy
import itertools
import json
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from pathweave.apr.channel_actions import ACTIONS, CHANNELS
from pathweave.settings import SelectorSettings, Settings

log = logging.getLogger(__name__)

COMBINATIONS: tuple[tuple[str, str, str], ...] = tuple(itertools.product(ACTIONS, repeat=len(CHANNELS)))
"""The 27 action combinations, in a fixed order (facts, questions, answers)."""
FALLBACK_ACTIONS = {channel: "unique" for channel in CHANNELS}
FORMAT = "pathweave-selector-policy/1"


def combination(actions: dict[str, str]) -> tuple[str, str, str]:
    """``{"facts": a, "questions": a, "answers": a}`` -> ``(a_facts, a_questions, a_answers)``.
    Raises ValueError on a missing channel or an unknown action."""
    try:
        combo = tuple(actions[channel] for channel in CHANNELS)
    except KeyError as exc:
        raise ValueError(f"actions need the channels {CHANNELS}, missing {exc}") from None
    unknown = [a for a in combo if a not in ACTIONS]
    if unknown:
        raise ValueError(f"unknown selector action(s) {unknown}; expected one of {ACTIONS}")
    return combo  # type: ignore[return-value]


def feature_vector(query_embedding: np.ndarray, query_tokens: int, token_budget: int = 0) -> np.ndarray:
    """The policy's input x: ``(d + 2,)`` float32 = the query embedding ``(d,)`` (L2-normalized,
    d = 384 for MiniLM), log1p(query_tokens) / 10 and log1p(token_budget) / 10 (tokens; a
    budget of 0 = none). Spec §3 "features = query embedding (+ query length, token budget)".
    Raises ValueError on a non-vector embedding or negative counts."""
    vector = np.asarray(query_embedding, dtype=np.float32)
    if vector.ndim != 1 or not vector.size:
        raise ValueError(f"query embedding must be a non-empty vector, got shape {vector.shape}")
    if query_tokens < 0 or token_budget < 0:
        raise ValueError("query tokens and token budget must be >= 0")
    extra = np.array([math.log1p(query_tokens) / 10, math.log1p(token_budget) / 10], dtype=np.float32)
    return np.concatenate([vector, extra])


def utility(accuracy: float, prompt_tokens: float, latency_ms: float, settings: SelectorSettings) -> float:
    """U = alpha x accuracy - beta_tokens x tokens - gamma x latency (ms) (APR paper §2.8; the
    faithfulness term is left out: no faithfulness judge here)."""
    return settings.alpha * accuracy - settings.beta_tokens * prompt_tokens - settings.gamma * latency_ms


def preference_pairs(utilities: Sequence[float], mode: str = "best", min_margin: float = 0.0) -> list[tuple[int, int]]:
    """Preference pairs ``(i+, i-)`` (indices into ``utilities``) with U[i+] > U[i-] + min_margin
    (APR paper §2.8: "whenever U(x, y+) > U(x, y-)").

    ``best``: i+ = the first index of the highest utility, paired with every strictly worse
    index (differences within ``min_margin`` are ties: no pair); ``all``: every such ordered
    pair. Raises ValueError on an unknown mode."""
    values = [float(u) for u in utilities]
    if mode == "best":
        if not values:
            return []
        top = int(np.argmax(values))
        return [(top, j) for j, u in enumerate(values) if values[top] > u + min_margin]
    if mode == "all":
        return [(i, j) for i, ui in enumerate(values) for j, uj in enumerate(values) if ui > uj + min_margin]
    raise ValueError(f"unknown pair mode {mode!r}; expected 'best' or 'all'")


def dpo_loss(policy_pos, policy_neg, reference_pos, reference_neg, beta: float):
    """Mean DPO loss over pairs: -log sigmoid(beta x ((lp+ - lp-) - (lp_ref+ - lp_ref-))).

    Arguments are ``(n,)`` torch tensors of log-probabilities log pi(y | x) of the preferred
    (``pos``) and dispreferred (``neg``) combinations under the policy and the frozen
    reference. beta scales both log-ratios (spec §3; the reference code scales only the
    policy's). Returns a scalar tensor."""
    import torch.nn.functional as F

    margin = (policy_pos - policy_neg) - (reference_pos - reference_neg)
    return -F.logsigmoid(beta * margin).mean()


def _network(inputs: int, hidden: int):
    """The MLP: Linear(inputs, hidden) + ReLU, then one Linear(hidden, 3) head per channel
    (heads start at zero: the initial policy is uniform)."""
    import torch
    from torch import nn

    class PolicyNetwork(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU())
            self.heads = nn.ModuleList(nn.Linear(hidden, len(ACTIONS)) for _ in CHANNELS)
            for head in self.heads:
                nn.init.zeros_(head.weight)
                nn.init.zeros_(head.bias)

        def forward(self, x):  # (n, inputs) -> (n, channels, actions) log-probabilities
            h = self.body(x)
            return torch.stack([torch.log_softmax(head(h), dim=-1) for head in self.heads], dim=1)

    return PolicyNetwork()


def _log_prob(network, x, combos):
    """log pi(y | x) ``(n,)`` of combinations ``combos`` ``(n, channels)`` (action indices)."""
    return network(x).gather(2, combos.unsqueeze(-1)).squeeze(-1).sum(dim=1)


@dataclass
class TrainReport:
    """What a training run did: examples and pairs used, mean DPO loss and pair accuracy
    (share of pairs with lp+ > lp-) per epoch, and the seconds it took."""

    examples: int
    pairs: int
    loss: list[float] = field(default_factory=list)
    pair_accuracy: list[float] = field(default_factory=list)
    seconds: float = 0.0


class SelectorPolicy:
    """A trained (or fresh) selector policy: ``choose(features) -> {"facts": action,
    "questions": action, "answers": action}`` (argmax per head).

    ``inputs``: the feature size (query embedding size + 2); ``hidden``: MLP units;
    ``meta``: JSON-able facts saved with the weights (embedder, utility weights, examples).
    Source: APR paper §2.8; spec §3.
    """

    def __init__(self, inputs: int, hidden: int, seed: int = 0, meta: dict | None = None) -> None:
        import torch

        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.network = _network(inputs, hidden)
        self.network.eval()
        self.inputs, self.hidden = inputs, hidden
        self.meta = dict(meta or {})

    def probabilities(self, features: np.ndarray) -> dict[str, dict[str, float]]:
        """pi(action | x) per channel for one feature vector ``(inputs,)``."""
        logp = self._log_probs(features)
        return {c: {a: float(math.exp(logp[i, j])) for j, a in enumerate(ACTIONS)} for i, c in enumerate(CHANNELS)}

    def choose(self, features: np.ndarray) -> dict[str, str]:
        """The most probable action per channel for one feature vector ``(inputs,)``
        (:func:`feature_vector`). Raises ValueError on a vector of the wrong size."""
        logp = self._log_probs(features)
        return {c: ACTIONS[int(np.argmax(logp[i]))] for i, c in enumerate(CHANNELS)}

    def _log_probs(self, features: np.ndarray) -> np.ndarray:
        import torch

        x = np.asarray(features, dtype=np.float32)
        if x.shape != (self.inputs,):
            raise ValueError(f"selector features must have shape ({self.inputs},), got {x.shape}")
        with torch.inference_mode():
            return self.network(torch.from_numpy(x)[None])[0].numpy()

    def save(self, path: str | Path) -> Path:
        """Write the weights and metadata to one safetensors file (parents created)."""
        from safetensors.torch import save_file

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        header = {"format": FORMAT, "inputs": self.inputs, "hidden": self.hidden, "channels": CHANNELS,
                  "actions": ACTIONS, "meta": self.meta}
        tensors = {k: v.detach().contiguous() for k, v in self.network.state_dict().items()}
        save_file(tensors, str(path), metadata={"pathweave": json.dumps(header)})
        return path

    @classmethod
    def load(cls, path: str | Path) -> "SelectorPolicy":
        """Read a file written by :meth:`save`. Raises FileNotFoundError, or ValueError when the
        file is not a selector policy or was trained for other channels/actions."""
        from safetensors import safe_open
        from safetensors.torch import load_file

        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"selector policy not found: {path}")
        try:
            with safe_open(str(path), framework="pt") as handle:
                header = json.loads((handle.metadata() or {}).get("pathweave", "{}"))
            tensors = load_file(str(path))
        except Exception as exc:  # safetensors raises its own error types on a damaged file
            raise ValueError(f"{path} is not a selector policy file: {exc}") from exc
        if header.get("format") != FORMAT:
            raise ValueError(f"{path} is not a selector policy file (format {header.get('format')!r})")
        if tuple(header["channels"]) != CHANNELS or tuple(header["actions"]) != ACTIONS:
            raise ValueError(f"{path} was trained for channels {header['channels']} / actions {header['actions']}")
        policy = cls(int(header["inputs"]), int(header["hidden"]), meta=header.get("meta"))
        try:
            policy.network.load_state_dict(tensors)
        except RuntimeError as exc:
            raise ValueError(f"{path}: weights do not fit the policy network: {exc}") from exc
        return policy


class FixedSelector:
    """The fallback selector: the same actions for every query (``unique`` everywhere)."""

    def __init__(self, actions: dict[str, str] | None = None) -> None:
        self.actions = dict(actions or FALLBACK_ACTIONS)

    def choose(self, features: np.ndarray) -> dict[str, str]:
        """``self.actions`` whatever the features."""
        return dict(self.actions)


def train_policy(features: np.ndarray, utilities: np.ndarray, settings: SelectorSettings,
                 initial: SelectorPolicy | None = None, meta: dict | None = None,
                 progress: Callable[[int, int], None] | None = None) -> tuple[SelectorPolicy, TrainReport]:
    """Train a policy with DPO on measured utilities (APR paper §2.8; spec §3).

    ``features``: ``(n, inputs)`` float32, one row per query (:func:`feature_vector`);
    ``utilities``: ``(n, 27)`` U of each query's combinations in :data:`COMBINATIONS` order
    (:func:`utility`). Pairs: :func:`preference_pairs` per query (``settings.pairs``,
    ``settings.min_margin``). The reference is ``initial`` (or a fresh seeded policy, the
    uniform one), frozen; the trained policy starts from it. AdamW (``settings.lr``,
    ``weight_decay``), ``settings.epochs`` over pairs shuffled with ``settings.seed``, batches
    of ``settings.batch_size`` pairs. ``progress(step, total_steps)`` after each step.
    Raises ValueError on mismatched shapes or when no query yields a pair.
    """
    import time

    import torch

    features = np.asarray(features, dtype=np.float32)
    utilities = np.asarray(utilities, dtype=np.float64)
    if features.ndim != 2 or utilities.shape != (features.shape[0], len(COMBINATIONS)):
        raise ValueError(f"need features (n, d) and utilities (n, {len(COMBINATIONS)}), "
                         f"got {features.shape} and {utilities.shape}")
    rows, pos, neg = [], [], []
    for row, values in enumerate(utilities):
        for i, j in preference_pairs(values, settings.pairs, settings.min_margin):
            rows.append(row)
            pos.append(i)
            neg.append(j)
    if not rows:
        raise ValueError("no preference pairs: every query's combinations have the same utility")
    started = time.perf_counter()
    index = {a: k for k, a in enumerate(ACTIONS)}
    combos = torch.tensor([[index[a] for a in combo] for combo in COMBINATIONS])
    x = torch.from_numpy(features)[torch.tensor(rows)]
    y_pos, y_neg = combos[torch.tensor(pos)], combos[torch.tensor(neg)]

    reference = initial or SelectorPolicy(features.shape[1], settings.hidden, settings.seed)
    if reference.inputs != features.shape[1]:
        raise ValueError(f"initial policy takes {reference.inputs} features, data has {features.shape[1]}")
    policy = SelectorPolicy(reference.inputs, reference.hidden, meta=meta)
    policy.network.load_state_dict(copy.deepcopy(reference.network.state_dict()))
    with torch.no_grad():  # the frozen reference's log-probabilities, computed once
        ref_pos, ref_neg = _log_prob(reference.network, x, y_pos), _log_prob(reference.network, x, y_neg)

    previous_threads = torch.get_num_threads()
    # one intra-op thread: the network is tiny and threads only wait on each other (on a
    # loaded small machine two threads were many times slower; see docs/benchmarks-history.md)
    torch.set_num_threads(1)
    try:
        report = _dpo_epochs(policy, x, y_pos, y_neg, ref_pos, ref_neg, settings, progress)
    finally:
        torch.set_num_threads(previous_threads)
    report.examples = len(features)
    policy.network.eval()
    report.seconds = time.perf_counter() - started
    policy.meta.update({"examples": report.examples, "pairs": report.pairs, "final_loss": report.loss[-1],
                        "utility": {"alpha": settings.alpha, "beta_tokens": settings.beta_tokens,
                                    "gamma": settings.gamma}, "pairs_mode": settings.pairs,
                        "dpo_beta": settings.beta, "epochs": settings.epochs, "lr": settings.lr,
                        "seed": settings.seed})
    return policy, report


def _dpo_epochs(policy: SelectorPolicy, x, y_pos, y_neg, ref_pos, ref_neg, settings: SelectorSettings,
                progress: Callable[[int, int], None] | None) -> TrainReport:
    """The DPO epochs of :func:`train_policy` over the pairs ``(x, y_pos, y_neg)`` with the
    reference log-probabilities ``ref_pos`` / ``ref_neg`` (AdamW, seeded batch order)."""
    import torch

    generator = torch.Generator().manual_seed(settings.seed)
    optimizer = torch.optim.AdamW(policy.network.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)
    report = TrainReport(examples=0, pairs=len(y_pos))
    steps_per_epoch = math.ceil(len(y_pos) / settings.batch_size)
    step = 0
    policy.network.train()
    for _ in range(settings.epochs):
        order = torch.randperm(len(y_pos), generator=generator)
        total, right = 0.0, 0
        for start in range(0, len(y_pos), settings.batch_size):
            batch = order[start:start + settings.batch_size]
            lp_pos, lp_neg = _log_prob(policy.network, x[batch], y_pos[batch]), _log_prob(policy.network, x[batch], y_neg[batch])
            loss = dpo_loss(lp_pos, lp_neg, ref_pos[batch], ref_neg[batch], settings.beta)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += float(loss.detach()) * len(batch)
            right += int((lp_pos > lp_neg).sum().detach())
            step += 1
            if progress:
                progress(step, steps_per_epoch * settings.epochs)
        report.loss.append(total / len(y_pos))
        report.pair_accuracy.append(right / len(y_pos))
    return report


def load_selector(settings: Settings, embedding_dim: int | None = None) -> SelectorPolicy | FixedSelector:
    """The selector of ``settings.selector.policy_path`` (loaded once per path and
    modification time), or :class:`FixedSelector` (``unique`` on every channel) when no path
    is configured, the file fails to load, or its policy takes other features than
    ``embedding_dim + 2`` (the embedder's size, when given); a failure is logged as a
    warning with the reason. The APR mode calls this per query (cheap after the first)."""
    path = settings.selector.policy_path
    if path is None:
        return FixedSelector()
    path = Path(path).expanduser()
    try:
        policy = _load_cached(str(path.resolve()), path.stat().st_mtime_ns)
        if embedding_dim is not None and policy.inputs != embedding_dim + 2:
            raise ValueError(f"it takes {policy.inputs} features, the embedder gives {embedding_dim} + 2")
        return policy
    except (OSError, ValueError) as exc:
        log.warning("selector policy %s not loaded (%s); using 'unique' on every channel", path, exc)
        return FixedSelector()


@lru_cache(maxsize=4)
def _load_cached(path: str, mtime_ns: int) -> SelectorPolicy:
    policy = SelectorPolicy.load(path)
    log.info("selector policy loaded from %s (trained on %s examples)", path, policy.meta.get("examples", "?"))
    return policy


def choose_actions(settings: Settings, query_embedding: np.ndarray, query_tokens: int,
                   token_budget: int = 0) -> dict[str, str]:
    """The selection actions for one query (what the APR mode calls when the caller named
    none): the configured policy's choice on :func:`feature_vector` of the query's ``(d,)``
    embedding, its length (tokens) and token budget (tokens, 0 = none), or ``unique`` on
    every channel (:func:`load_selector`)."""
    selector = load_selector(settings, int(np.asarray(query_embedding).size))
    return selector.choose(feature_vector(query_embedding, query_tokens, token_budget))
