"""Hugging Face `Trainer` subclasses: what transformers does with their `compute_loss`.

Since transformers 4.46 the Trainer passes `num_items_in_batch` (the window's
token count) to `compute_loss` and, when the model accepts loss kwargs (every
HF model does) and that count is given, no longer divides the loss by
`gradient_accumulation_steps` itself. An override that neither uses the count,
nor returns `super().compute_loss(...)`, nor sets
`self.model_accepts_loss_kwargs = False` returns a loss that is never divided
by K. These are the facts the trainer rules read; a class is only an HF
trainer when its bases say so through the module's imports (`trl` trainers
included), directly or through another class of the module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, Optional

import libcst as cst

from accumlint.model.facts import Function, ModuleFacts
from accumlint.model.names import dotted, last_part
from accumlint.model.tree import walk
from accumlint.source.patterns import LazyPattern

_TRANSFORMERS_TRAINER = LazyPattern(r"^transformers(\.[\w.]+)?\.(Trainer|Seq2SeqTrainer)$")
_TRL_TRAINER = LazyPattern(r"^trl(\.[\w.]+)?\.\w*Trainer$")
_HUGGING_FACE_PACKAGES = frozenset({"transformers", "peft", "trl", "accelerate", "diffusers", "optimum"})
# A Hugging Face model class named in the text (`AutoModelForCausalLM`, `T5ForConditionalGeneration`).
_HF_MODEL_CLASS = LazyPattern(r"\b(?:AutoModel|[A-Z]\w*For[A-Z]\w*|\w+LMHeadModel)\b")
# What `from_pretrained` loads besides models.
_NOT_A_MODEL = LazyPattern(r"Tokenizer|Config|Processor|FeatureExtractor|Scheduler|Pipeline", re.IGNORECASE)
_LOSS_KWARGS_MODEL = LazyPattern(r"AutoModelFor\w+|\b\w+For\w+\.from_pretrained\b")
_FLAG = "model_accepts_loss_kwargs"
# the K of a Trainer, as its methods read it
TRAINER_K = "self.args.gradient_accumulation_steps"


@dataclass(frozen=True, eq=False)
class TrainerClass:
    """A subclass of an HF trainer, with its `compute_loss` override (None if inherited)."""

    node: cst.ClassDef
    compute_loss: Optional[Function]
    init: Optional[Function]
    trl: bool
    disables_loss_kwargs: bool
    # `training_step` overridden without `super().training_step(...)`: the override, not the
    # Trainer, decides what the backward runs on and whether it is divided by K
    owns_training_step: bool = False


def trainer_classes(facts: ModuleFacts) -> list[TrainerClass]:
    found = []
    for owner in facts.classes.values():
        kind = _trainer_kind(facts, owner, set())
        if kind is None:
            continue
        found.append(TrainerClass(
            node=owner,
            compute_loss=_method(owner, "compute_loss"),
            init=_method(owner, "__init__"),
            trl=kind == "trl",
            disables_loss_kwargs=_disables(facts, owner, set()),
            owns_training_step=_owns_training_step(owner),
        ))
    return found


def _owns_training_step(owner: cst.ClassDef) -> bool:
    """The class defines `training_step` and never calls the base class's."""
    step = _method(owner, "training_step")
    return step is not None and not any(
        type(node) is cst.Attribute and node.attr.value == "training_step" and type(node.value) is cst.Call
        and dotted(node.value.func) == "super" for node in walk(step.body))


def hf_model_in_module(facts: ModuleFacts) -> bool:
    """The module imports a Hugging Face library (transformers, peft, trl, accelerate, diffusers)
    and names a model class of theirs or loads a pretrained model
    (`AutoModelForCausalLM.from_pretrained(...)`, `BertForSequenceClassification`): its models
    are theirs, with their loss (`outputs.loss`). A module that imports transformers for its
    schedulers only and trains a model of its own says nothing of that model."""
    return any(full.split(".")[0] in _HUGGING_FACE_PACKAGES for full in facts.imports.values()) and (
        _HF_MODEL_CLASS.search(facts.text) is not None or any(_loads_pretrained_model(call) for call in facts.calls))


def loss_kwargs_model_in_module(facts: ModuleFacts) -> bool:
    """The module loads a model of a transformers task class (`AutoModelFor*`,
    `*For*.from_pretrained`), whose forward takes the Trainer's loss kwargs (GA207's evidence).
    A bare `AutoModel.from_pretrained(..., trust_remote_code=True)` may be remote code whose
    forward takes none, and then the Trainer divides the loss itself."""
    # the callee as written, and resolved through a name bound to the imported class
    # (`MODEL_CLASS = AutoModelForCausalLM`, then `MODEL_CLASS.from_pretrained(...)`)
    registered = _registered_auto_classes(facts)
    return any(_LOSS_KWARGS_MODEL.search(callee) or _LOSS_KWARGS_MODEL.search(facts.qualified(callee) or "")
               or _bound_to_task_class(facts, callee)
               for call in facts.calls if (callee := dotted(call.func)) is not None
               and callee.split(".")[0] not in registered and not callee.endswith(".register"))


def _registered_auto_classes(facts: ModuleFacts) -> frozenset[str]:
    """The Auto classes into which the module registers a class of its own
    (`AutoModelForCausalLM.register(Config, LLM)`): what they load may be that class,
    whose forward need not take the Trainer's loss kwargs."""
    return frozenset(callee.split(".")[0] for call in facts.calls
                     if (callee := dotted(call.func)) is not None and callee.endswith(".register")
                     and callee.startswith("Auto") and callee.count(".") == 1)


def _bound_to_task_class(facts: ModuleFacts, callee: str) -> bool:
    """`MODEL_CLASS.from_pretrained(...)` where some binding of `MODEL_CLASS` names a task class
    (`MODEL_CLASS = AutoModelForCausalLM` in one arm, `AutoModelForMaskedLM if mlm else AutoModel`
    in another): the module loads such a model in some of its runs."""
    if not callee.endswith(".from_pretrained"):
        return False
    holder = callee[: -len(".from_pretrained")]
    if "." in holder:
        return False
    for binding in facts.bindings.get(holder, ()):
        value = binding.value
        arms = [value.body, value.orelse] if type(value) is cst.IfExp else [value]
        if any(type(arm) in (cst.Name, cst.Attribute) and _LOSS_KWARGS_MODEL.search(
                facts.qualified(dotted(arm)) or dotted(arm) or "") for arm in arms):
            return True
    return False


def _loads_pretrained_model(call: cst.Call) -> bool:
    """`AutoModelFor*.from_pretrained(...)`, `XForY.from_pretrained(...)`, `AutoModel.from_pretrained(...)`."""
    callee = dotted(call.func) or ""
    if not callee.endswith(".from_pretrained"):
        return False
    owner = last_part(callee[: -len(".from_pretrained")])
    return bool(owner) and owner[:1].isupper() and _NOT_A_MODEL.search(owner) is None


def uses_items_in_batch(function: Function) -> bool:
    """`num_items_in_batch` is read in the body, or the loss comes from `super().compute_loss(...)`."""
    for node in walk(function.body):
        if type(node) is cst.Name and node.value == "num_items_in_batch":
            return True
        if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value == "compute_loss":
            if dotted(node.func.value) == "super()":
                return True
    return False


def division_by_trainer_k(function: Function) -> Optional[cst.BinaryOperation]:
    """The first division in the body by the Trainer's own K (`loss / TRAINER_K`)."""
    for node in walk(function.body):
        if type(node) is cst.BinaryOperation and type(node.operator) is cst.Divide:
            if dotted(node.right) == TRAINER_K:
                return node
    return None


def super_init(init: Function) -> Optional[cst.SimpleStatementLine]:
    """The `super().__init__(...)` statement at the top level of an `__init__`."""
    body = init.body
    if type(body) is not cst.IndentedBlock:
        return None
    for statement in body.body:
        if type(statement) is cst.SimpleStatementLine and type(statement.body[0]) is cst.Expr:
            call = statement.body[0].value
            if type(call) is cst.Call and dotted(call.func) == "super().__init__":
                return statement
    return None


def _trainer_kind(facts: ModuleFacts, owner: cst.ClassDef, seen: set[int]) -> Optional[Literal["trl", "transformers"]]:
    if id(owner) in seen:
        return None
    seen.add(id(owner))
    for base in owner.bases:
        name = dotted(base.value) or ""
        qualified = facts.qualified(name) or ""
        if _TRL_TRAINER.match(qualified):
            return "trl"
        if _TRANSFORMERS_TRAINER.match(qualified):
            return "transformers"
        parent = facts.classes.get(name)
        if parent is not None and parent is not owner:
            kind = _trainer_kind(facts, parent, seen)
            if kind is not None:
                return kind
    return None


def _disables(facts: ModuleFacts, owner: cst.ClassDef, seen: set[int]) -> bool:
    """`self.model_accepts_loss_kwargs = False` in the class or a module base class."""
    if id(owner) in seen:
        return False
    seen.add(id(owner))
    for node in walk(owner.body):
        if type(node) is cst.Assign and type(node.value) is cst.Name and node.value.value == "False":
            if any(dotted(t.target) in (f"self.{_FLAG}", _FLAG) for t in node.targets):
                return True
    for base in owner.bases:
        name = dotted(base.value)
        if name is not None and name in facts.classes and _disables(facts, facts.classes[name], seen):
            return True
    return False


def _method(owner: cst.ClassDef, name: str) -> Optional[Function]:
    for statement in owner.body.body:
        if type(statement) is cst.FunctionDef and statement.name.value == name:
            return statement
    return None
