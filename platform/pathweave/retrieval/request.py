"""One query request, the same for the CLI, the API and the benchmarks:
:class:`QueryRequest`, checked once here (:meth:`QueryRequest.check`), so that the same
request gets the same answer or the same typed error everywhere
(:mod:`pathweave.errors`). Which options apply to which mode is each mode's
entry of :data:`pathweave.model.MODE_OPTIONS` (the table is in ``docs/architecture.md``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pathweave.errors import BadRequest, NotApplicable
from pathweave.model import MODE_OPTIONS, MODES, Mode
from pathweave.records.session_ids import check_session_id
from pathweave.text import has_visible_text

SELECTION_METHODS = ("auto", "ilp", "greedy")
CONTEXT_STYLES = ("bullets", "triples")



class QueryRequest(BaseModel):
    """A question and how to answer it. ``None`` is "not given": an option given to a mode
    it does not apply to is a :class:`~pathweave.errors.NotApplicable` error, never dropped."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(..., description="The question (plain text).")
    mode: Mode = Field(MODES[0], description="Retrieval mode: " + ", ".join(MODES) + ".")
    k: int = Field(5, ge=1, description="Passages to return.")
    token_budget: int | None = Field(None, ge=0, description="Context token budget (tokens): also select the best "
                                                       "connected evidence that fits it (spec §5).")
    selection_method: Literal[SELECTION_METHODS] | None = Field(  # type: ignore[valid-type]
        None, description="Context selection, with token_budget: CP-SAT ILP, greedy, or auto (the default).")
    context_style: Literal[CONTEXT_STYLES] | None = Field(  # type: ignore[valid-type]
        None, description="How the selected context is written, with token_budget (default bullets).")
    session_id: str | None = Field(None, description="The session this question belongs to (1 to 200 characters): "
                                                     "evidence the session was already sent is referenced by code, "
                                                     "not re-sent. Modes proprag, dense and hipporag2: with a "
                                                     "token_budget (the lines of the budgeted context); mode apr: its "
                                                     "runs.")
    answer: bool = Field(False, description="Also generate a short answer with the LLM from the budgeted context "
                                            "(or the top passages), citing what it used. Mode prunerag always "
                                            "answers (its decomposition tree is returned too).")
    write_record: bool | None = Field(None, description="Write the reasoning record to the graph (default: "
                                                        "the setting query.write_reasoning).")

    @classmethod
    def of(cls, question: str, **options) -> "QueryRequest":
        """A checked request from keyword options (the Python entry,
        :meth:`~pathweave.query.retriever.Retriever.query`): a value of the wrong type
        or an unknown option is a :class:`~pathweave.errors.BadRequest` too."""
        from pydantic import ValidationError

        if options.get("mode", MODES[0]) not in MODES:
            raise BadRequest(f"unknown mode {options['mode']!r}; use one of {', '.join(MODES)}")
        try:
            request = cls(question=question, **options)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'request'}: {e['msg']}" for e in exc.errors())
            raise BadRequest(problems) from None
        return request.check()

    def check(self) -> "QueryRequest":
        """This request with its question stripped, after the checks its fields' types cannot
        make (the bounds and choices are the model's own, enforced when it is built). Raises
        :class:`~pathweave.errors.BadRequest` (a question without a visible character, a
        session id that is empty or over 200 characters) or
        :class:`~pathweave.errors.NotApplicable` (an option the mode does not use; selection
        method, style and, in the ranking modes, a session without a token budget)."""
        question = self.question.strip()
        if not has_visible_text(question):
            raise BadRequest("question is empty (only whitespace or invisible characters)")
        applies = MODE_OPTIONS[self.mode]
        for name in ("token_budget", "session_id"):
            if getattr(self, name) is not None and name not in applies:
                raise NotApplicable(f"{name} does not apply to mode {self.mode} "
                                    f"(it applies to mode {', '.join(modes_with(name))})")
        for name in ("selection_method", "context_style"):
            if getattr(self, name) is not None and self.token_budget is None:
                raise NotApplicable(f"{name} applies with a token_budget only")
        update: dict = {"question": question} if question != self.question else {}
        if self.session_id is not None:
            if "token_budget" in applies and self.token_budget is None:
                raise NotApplicable(f"session_id applies with a token_budget in mode {self.mode} "
                                    "(the lines of the budgeted context are what a session reuses)")
            try:
                session_id = check_session_id(self.session_id)
            except ValueError as exc:
                raise BadRequest(str(exc)) from None
            if session_id != self.session_id:
                update["session_id"] = session_id
        return self.model_copy(update=update) if update else self

    def record(self, default: bool) -> bool:
        """Write the reasoning record? ``write_record``, else ``default`` (the setting)."""
        return default if self.write_record is None else self.write_record

    @property
    def method(self) -> str:
        """The context selection method (``auto`` when not given)."""
        return self.selection_method or "auto"

    @property
    def style(self) -> str:
        """The context style (``bullets`` when not given)."""
        return self.context_style or "bullets"


def modes_with(option: str) -> list[str]:
    """The modes that ``option`` (a :data:`pathweave.model.OPTION_NAMES` name) applies to."""
    return [mode for mode in MODES if option in MODE_OPTIONS[mode]]
