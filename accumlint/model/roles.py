"""Roles: what an object is (optimizer, scheduler, scaler, framework) and what a call does.

An object's role comes first from how the module built it (`torch.optim.AdamW(...)`,
`GradScaler()`, `deepspeed.initialize(...)`), then from its name. A call's role
(backward, optimizer step, zeroing, scheduler step, clipping, scaler work, sync
control) follows from its method name and its receiver's role. Anything else is
no role at all: `env.step(action)` is not a step.
"""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass
from functools import cached_property
from typing import Literal, Optional, cast

import libcst as cst

from accumlint.model.facts import DATA_PARALLEL_WRAPS, Binding, Function, ModuleFacts, ancestors, constructed, deepspeed_initialize
from accumlint.model.gates import boolean_operands, single_micro_batch_arm
from accumlint.model.frameworks import AcceleratorInfo, Frameworks
from accumlint.model.names import (
    argument_for, call_name, code, dotted, keyword, last_part, looks_like_accumulation, looks_like_optimizer,
    looks_like_scaler, looks_like_scheduler, parameters, positional, string_value,
)
from accumlint.model.scopes import call_sites
from accumlint.model.tree import walk
from accumlint.source import backward
from accumlint.source.patterns import LazyPattern

_OPTIMIZER_CLASSES = LazyPattern(
    r"^(SGD|Adam|AdamW|Adamax|Adagrad|Adadelta|RMSprop|Rprop|ASGD|NAdam|RAdam|LBFGS|SparseAdam|Lion|Lamb|LAMB"
    r"|Adafactor|AdamW8bit|Adam8bit|PagedAdamW\w*|FusedAdam|FusedLAMB|DeepSpeedCPUAdam|ZeroRedundancyOptimizer"
    r"|Muon|Shampoo|Sophia\w*|Adan|AdaBelief|Novograd|LARS|\w*ScheduleFree\w*)$"
)
_OPTIMIZER_FACTORY = LazyPattern(r"optimi[sz]er", re.IGNORECASE)
_SCHEDULER_FACTORY = LazyPattern(r"sched|(^|_)[A-Z]?\w*LR$|LR$|Scheduler", re.IGNORECASE)
_LOSS_CLASS = LazyPattern(r"Loss$")
_LR_WORD = LazyPattern(r"LR(?=[A-Z]|$)")  # "LR" as a word of a CamelCase class name
_CLIP_FUNCTIONS = {"clip_grad_norm_", "clip_grad_value_", "clip_grad_norm", "clip_gradients", "clip_grad", "dispatch_clip_grad", "clip_grads"}
_MODEL_NAME = LazyPattern(r"model|net|module", re.IGNORECASE)
_PREPARING = {"prepare", "prepare_model", "setup", "setup_module"}
_LOSS_CALLEE = LazyPattern(r"loss|criterion|^backward$", re.IGNORECASE)  # what a model's output feeds (`_computes_loss`)
_LOSS_TARGET = LazyPattern(r"loss", re.IGNORECASE)
_ZEROING_METHODS = {"zero_grad", "zero_grad_"}
_SYNC_CONTEXTS = {"no_sync", "no_backward_sync"}
# weight averages: diffusers EMAModel, timm ModelEma*, ultralytics ModelEMA,
# ema_pytorch EMA, torch_ema ExponentialMovingAverage, torch.optim.swa_utils.AveragedModel
_EMA_CLASSES = LazyPattern(r"^(EMAModel|ModelEma(V2|V3)?|ModelEMA|EMA|ExponentialMovingAverage|AveragedModel|EMAHelper)$")
_EMA_NAME = LazyPattern(r"(?i:(^|_)ema($|_|\d))|^ema[A-Z]|[a-z]EMA($|[A-Z_\d])")
_EMA_METHODS = {"update", "step", "update_parameters"}
# a function that moves the average given as its first argument (`update_ema(ema, model)`)
_EMA_FUNCTIONS = LazyPattern(r"^(?i:update_?ema|ema_?update)$")
# logging calls whose arguments are what a run reports
_LOG_RECEIVERS = LazyPattern(r"^(logging|logger|log|LOGGER|_logger|LOG)$")
_LOG_METHODS = {"info", "debug", "warning", "error", "log", "critical"}
# A logger object by its name (not `log`, which also names a list of records).
_LOGGER_OBJECT = LazyPattern(r"^(logger|LOGGER|_logger)$")
_METRIC_METHODS = {"add_scalar", "add_scalars", "set_postfix", "set_postfix_str", "set_description", "set_description_str",
                   "log_metric", "log_metrics", "log_dict"}
_LOG_FRAMEWORKS = {"wandb", "accelerator", "fabric", "self", "mlflow", "run", "experiment"}
_PRINTING_FRAMEWORKS = {"accelerator", "fabric"}

# What a call does in a training loop (see `Role`).
RoleKind = Literal["backward", "step", "zero", "sched", "clip", "scale", "unscale", "update", "sync", "ema", "log"]
# Who runs a backward, or what steps (see `Role.flavor`); "" when nothing more is known.
Flavor = Literal["", "tensor", "accelerate", "fabric", "lightning", "lightning-auto", "deepspeed", "autograd",
                 "scaler", "engine", "project"]
# What an object is, from how the module built it or from its name (see `Objects.kind_of`).
ObjectKind = Literal["optimizer", "scheduler", "scaler", "accelerator", "fabric", "engine", "dataloader", "loss",
                     "ema", "ddp"]
_SCALER_ROLES: dict[str, RoleKind] = {"scale": "scale", "unscale_": "unscale", "update": "update"}
# The kind of object a project subclass of a framework class builds (`ModuleFacts.framework_class`).
_FRAMEWORK_KINDS: dict[str, ObjectKind] = {"Accelerator": "accelerator", "Fabric": "fabric", "GradScaler": "scaler"}
_DEEPSPEED_RETURNS: dict[int, ObjectKind] = {0: "engine", 1: "optimizer", 3: "scheduler"}  # `deepspeed.initialize(...)`


@dataclass(frozen=True)
class Role:
    """What one call does in a training loop.

    kind: backward | step | zero | sched | clip | scale | unscale | update | sync | ema | log
    call: the call that does it (for assignment zeroing, the assignment).
    target: the optimizer a step/zero/unscale concerns, the loss a backward runs on.
    flavor: for a backward, who runs it (tensor, accelerate, fabric, lightning,
    lightning-auto, deepspeed, autograd, project: a project class's `backward(loss)`
    method that backpropagates its argument); for a step, "scaler" when a GradScaler
    steps, "engine" when a DeepSpeed engine steps.
    closure: for an optimizer step, the closure it is given (`optimizer.step(closure)`).
    """

    kind: RoleKind
    call: cst.CSTNode  # the call; for `p.grad = None` zeroing, the assignment
    receiver: Optional[str] = None
    target: Optional[cst.BaseExpression] = None
    flavor: Flavor = ""
    closure: Optional[cst.BaseExpression] = None

    @property
    def backpropagates_here(self) -> bool:
        """A backward the loop itself runs on this process's loss, so that a DDP wrap
        all-reduces the gradients it produces: a tensor's `backward()`,
        `torch.autograd.backward`, accelerate's and Fabric's. Not DeepSpeed's or
        Lightning's, whose engines own the sync, nor a project object's method
        (`loss_scaler(loss, optimizer, update_grad=...)`), which reads as the object's
        own update (rules/GA401.md, Known limits)."""
        return self.kind == "backward" and self.flavor in ("tensor", "autograd", "accelerate", "fabric")

    @property
    def closure_step(self) -> bool:
        """`optimizer.step(closure)`: the closure's zeroing and backward run inside the
        step, so the step is a whole update, neither before nor after a backward of the loop."""
        return self.closure is not None


class Objects:
    """Answers "what is this object?" for one module, with the configured extra names."""

    def __init__(self, facts: ModuleFacts, optimizer_names: tuple[str, ...] = ()) -> None:
        self.facts = facts
        self.optimizer_names = optimizer_names
        self._cache: dict[str, Optional[ObjectKind]] = {}
        self._asking: set[int] = set()  # calls whose returns are being read
        # (id(call), ids of the loops around it) -> (the call, its role): `role`, once per question
        self._roles: dict[tuple[int, ...], tuple[cst.Call, Optional[Role]]] = {}
        self._log_wrappers: dict[str, bool] = {}  # module functions whose body only logs (`_logs_only`)

    # -- what a binding's value built ---------------------------------------
    def built_kind(self, value: cst.BaseExpression, index: Optional[int]) -> Optional[ObjectKind]:
        """What a constructor call returns: optimizer, scheduler, scaler, accelerator,
        fabric, engine, dataloader, loss, or None when the module does not say. A move of
        the built module (`nn.CrossEntropyLoss().to(device)`) is the object its constructor built."""
        value = constructed(value)
        if type(value) is not cst.Call:
            return None
        name = self.facts.qualified(self.facts.maker(value)) or ""
        tail = last_part(name)
        if index is not None:
            if deepspeed_initialize(name):
                return _DEEPSPEED_RETURNS.get(index)
            element = self.facts.prepared_element(value, index)
            if type(element) is cst.Call:  # `accelerator.prepare(..., get_linear_schedule_with_warmup(...))`
                return self.built_kind(element, None)
            return self._returned_kind(value, index)
        if name.startswith("torch.optim.lr_scheduler") or (tail.startswith("get_") and "schedule" in tail) \
                or name == "torch.optim.swa_utils.SWALR":
            return "scheduler"
        if name == "torch.optim.swa_utils.AveragedModel":
            return "ema"
        if name.startswith("torch.optim.") and tail[:1].isupper() or _OPTIMIZER_CLASSES.match(tail):
            return "optimizer"
        if tail == "optimizers" and name.startswith("self."):
            return "optimizer"
        if _OPTIMIZER_FACTORY.search(tail) and not looks_like_scheduler(tail):
            return "optimizer"
        if _SCHEDULER_FACTORY.search(tail) and tail[:1].isupper() or "scheduler" in tail.lower():
            return "scheduler"
        if tail[:1].isupper() and _LR_WORD.search(tail):
            return "scheduler"  # `ConstantLRWithWarmup`, `WarmupLRSchedule`
        if tail == "GradScaler" or tail == "ShardedGradScaler":
            return "scaler"
        if tail == "Accelerator":
            return "accelerator"
        if _EMA_CLASSES.match(tail):
            return "ema"
        if tail == "Fabric":
            return "fabric"
        if tail == "DataLoader":
            return "dataloader"
        if tail in DATA_PARALLEL_WRAPS:
            return "ddp"
        if _LOSS_CLASS.search(tail) and (name.startswith("torch.nn") or name.startswith("nn.")):
            return "loss"
        if tail[:1].isupper():
            framework = self.facts.framework_class(call_name(value))
            if framework is not None:
                return _FRAMEWORK_KINDS[framework]
        return self._returned_kind(value)

    def _returned_kind(self, call: cst.Call, index: Optional[int] = None) -> Optional[ObjectKind]:
        """What a module function returns (`model = wrap(model)` with `return DDP(...)`), or the
        element `index` of the tuple it returns (`model, opt = setup(args)`), when the returns
        that build something agree (`return model` unwrapped on one process is read as the
        bindings of a name are); each call is asked once per question."""
        if id(call) in self._asking:
            return None
        self._asking.add(id(call))
        try:
            kinds = {self.built_kind(value, None) for value in self.facts.returned(call, index)} - {None}
        finally:
            self._asking.discard(id(call))
        return kinds.pop() if len(kinds) == 1 else None

    def engine_owned(self, expr: Optional[cst.BaseExpression], function: Optional[Function], depth: int = 0) -> bool:
        """An object that `deepspeed.initialize` returned (`engine, opt, _, _ =
        deepspeed.initialize(...)`), as `function` binds the name, directly or through a
        module function that returns it (`model, opt, sched = setup_deepspeed(...)`): the
        engine runs its step and zeroes its gradients, so a zeroing of its own is not owed."""
        name = dotted(expr) if expr is not None else None
        if name is None or depth > 2:
            return False
        for binding in self.facts.values_in(name, function):
            value = binding.value
            if type(value) is not cst.Call or binding.index is None:
                continue
            qualified = self.facts.qualified(call_name(value)) or ""
            if deepspeed_initialize(qualified):
                return True
            helper = self.facts.functions.get(call_name(value) or "")
            if helper is not None and any(self.engine_owned(returned, helper, depth + 1)
                                          for returned in self.facts.returned(value, binding.index)):
                return True
        return False

    def kind_of(self, expr: Optional[cst.BaseExpression]) -> Optional[ObjectKind]:
        """The role of an object expression, from its bindings, else its name
        (`accelerator.unwrap_model(ema)` is `ema`)."""
        if type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value == "unwrap_model" \
                and len(expr.args) == 1 and self.kind_of(expr.func.value) == "accelerator":
            expr = expr.args[0].value
        name = dotted(expr) if expr is not None else None
        if name is None:
            return None
        if name not in self._cache:
            # unknown while it is being resolved: `opt, model = prepare(model, opt)`
            # asks each name about the other
            self._cache[name] = None
            self._cache[name] = self._kind_of_name(name)
        return self._cache[name]

    def _kind_of_name(self, name: str) -> Optional[ObjectKind]:
        kind = self._named_kind(name)
        if kind in ("optimizer", "engine") and self.facts.project_object(name):
            # a plain project class wrapping optimizers (`EveryDreamOptimizer(...)`), or a
            # project `Engine` named `engine` that is no DeepSpeed engine
            return None
        return kind

    def _named_kind(self, name: str) -> Optional[ObjectKind]:
        if name.endswith("optimizers()"):
            return "optimizer"
        for binding in self.facts.values_of(name):
            kind = self.built_kind(binding.value, binding.index)
            if kind is not None:
                return kind
            if type(binding.value) is cst.Call and binding.index is not None:
                prepared = self._prepared_kind(binding)
                if prepared is not None:
                    return prepared
        tail = last_part(name)
        if looks_like_scheduler(name):
            return "scheduler"
        if looks_like_scaler(name) and not self._built_from_other_class(name, "Scaler"):
            return "scaler"
        if looks_like_optimizer(name, self.optimizer_names):
            return "optimizer"
        if tail in ("accelerator",):
            return "accelerator"
        if tail == "fabric":
            return "fabric"
        if tail in ("model_engine", "engine", "ds_engine", "deepspeed_engine") and not self._annotated_other_class(name):
            return "engine"
        if _EMA_NAME.search(tail):
            return "ema"
        return None

    def _annotated_other_class(self, name: str) -> bool:
        """A plain name that the module's functions take as a parameter annotated with a class
        that is not DeepSpeed's (`def train_batch(self, engine: Engine, ...)`, `Engine` a
        project class): the annotation says what the object is, not its name."""
        if "." in name:
            return False
        annotations = self.facts.once(_parameter_annotations, self.facts.module).get(name)
        if not annotations:
            return False
        return all((self.facts.qualified(dotted(a)) or "").partition(".")[0] not in ("deepspeed", "")
                   for a in annotations)

    def _built_from_other_class(self, name: str, word: str) -> bool:
        """Every binding of the name builds an object of a class whose name lacks `word`
        (`scaler_meter = AverageMeter()`): what the class says beats what the name says."""
        bindings = self.facts.values_of(name)
        classes = [last_part(call_name(b.value) or "") if type(b.value) is cst.Call and b.index is None else ""
                   for b in bindings]
        return bool(classes) and all(cls[:1].isupper() and word not in cls for cls in classes)

    def _prepared_kind(self, binding: Binding) -> Optional[ObjectKind]:
        """`model, optimizer, ... = accelerator.prepare(model, optimizer, ...)`: the
        element keeps the kind of the argument at the same position."""
        call = cast(cst.Call, binding.value)  # the caller asks only of a call's element
        index = binding.index
        if index is None:
            return None
        tail = last_part(call_name(call) or "")
        if tail not in ("prepare", "setup", "initialize"):
            return None
        argument = positional(call, index)
        if argument is None or dotted(argument) == binding.target:
            return None
        return self.kind_of(argument)

    @cached_property
    def wrapped_model(self) -> Optional[str]:
        """The name of the first model the module wraps for data parallelism (see
        `wrapped_models`)."""
        return self.wrapped_models[0] if self.wrapped_models else None

    @cached_property
    def wrapped_models(self) -> list[str]:
        """The names of the models the module wraps for data parallelism, in order:
        explicitly with DDP/FSDP (also assigned to an attribute), or through
        `accelerator.prepare` / `fabric.setup` (which wrap when launched on several
        processes), whether they return one object (`model = accelerator.prepare(model)`)
        or a tuple (`self.model, opt = accelerator.prepare(self.model, opt)`)."""
        found: list[str] = []
        for name, bindings in self.facts.bindings.items():
            if any(self._wraps(name, binding) for binding in bindings):
                found.append(name)
        return found

    def _wraps(self, name: str, binding: Binding) -> bool:
        value = binding.value
        if self._only_without_accumulation(binding.statement):
            return False
        if self.built_kind(value, binding.index) == "ddp" or self._wraps_in_an_arm(value):
            return True
        if type(value) is cst.Name:
            # `self.model = model` after the method's own `model = DDP(model)`
            return self.frameworks.binding_wrap(binding) is not None
        if not (type(value) is cst.Call and type(value.func) is cst.Attribute):
            return False
        if value.func.attr.value not in _PREPARING:
            return False
        if self.kind_of(value.func.value) not in ("accelerator", "fabric"):
            return False
        if binding.index is None and positional(value, 1) is not None:
            return False  # the whole tuple bound to one name
        argument = positional(value, binding.index or 0)
        if argument is None or not self._model_like(name):
            return False
        given = dotted(argument)
        return self._model_like(given) or (given is not None and self._kind_of_name(given) is None
                                           and self._computes_loss(name))

    def _only_without_accumulation(self, statement: cst.CSTNode) -> bool:
        """`if world_size > 1 and accum == 1: model = DDP(model)`: a statement in an arm
        that runs only with K equal to 1 (the arm's test, or one `and` operand of it,
        compares K with 1) never runs in a run that accumulates, so it wraps nothing
        there."""
        chain = (*ancestors(self.facts.parents, statement), statement)
        for parent, child in zip(chain, chain[1:]):
            if type(parent) is not cst.If:
                continue
            arm: Optional[bool] = True if child is parent.body else False if child is parent.orelse else None
            if arm is None:
                continue
            operands = boolean_operands(parent.test, cst.And) if arm else [parent.test]
            is_k = lambda node: looks_like_accumulation(dotted(node) or "")  # noqa: E731
            if any(single_micro_batch_arm(operand, is_k) is arm for operand in operands):
                return True
        return False

    def _wraps_in_an_arm(self, value: cst.BaseExpression) -> bool:
        """`DDP(model, ...) if distributed else model`: wrapped whenever the run is distributed."""
        return type(value) is cst.IfExp and any(
            self.built_kind(arm, None) == "ddp" for arm in (value.body, value.orelse))

    def _model_like(self, name: Optional[str]) -> bool:
        """Named like a model, or called like one (`ssl_wrapper(seq)`) and known as nothing else."""
        if name is None:
            return False
        if _MODEL_NAME.search(last_part(name)):
            return True
        return name in self._called_names and self._kind_of_name(name) is None

    def _computes_loss(self, name: str) -> bool:
        """Some call of `name` in the module computes a loss with data: its result is bound to
        a loss-named target (`loss = self.vae(images, return_loss=True)`, `loss, parts =
        ...`) or is an argument of a loss or a backward (`criterion(net(x), y)`,
        `F.mse_loss(...)`, `accelerator.backward(...)`). An object prepared under any name
        (`self.vae, opt = accelerator.prepare(vae, opt)`) is then the model whose gradients
        the loop's backward fills, which a callable that computes anything else (a noise
        sampler, a tokenizer) is not known to be."""
        for call in self.facts.calls:
            if dotted(call.func) != name or not call.args:
                continue
            node: cst.CSTNode = call
            while True:
                parent = self.facts.parents.get(id(node))
                if parent is None or isinstance(parent, (cst.BaseCompoundStatement, cst.SimpleStatementLine, cst.Lambda)):
                    break
                if type(parent) is cst.Call and parent is not call and node is not parent.func:
                    if _LOSS_CALLEE.search(last_part(dotted(parent.func) or "")):
                        return True
                elif type(parent) is cst.Assign and any(_LOSS_TARGET.search(code(n)) for t in parent.targets
                                                        for n in walk(t.target) if type(n) is cst.Name):
                    return True
                node = parent
        return False

    @cached_property
    def _called_names(self) -> set[str]:
        return {name for call in self.facts.calls if (name := dotted(call.func)) is not None}

    def is_optimizer(self, expr: Optional[cst.BaseExpression]) -> bool:
        return self.kind_of(expr) == "optimizer"

    @cached_property
    def frameworks(self) -> Frameworks:
        """Accelerate, data-parallel and sync-control facts of this module.

        They ask these objects back through a weak proxy: a plain reference would
        make a cycle, and the module's whole tree (which `facts` holds) would wait
        for the cyclic collector instead of going as soon as the file is done."""
        return Frameworks(self.facts, weakref.proxy(self))

    def accelerator(self, expr: Optional[cst.BaseExpression]) -> Optional[AcceleratorInfo]:
        """The Accelerator behind `expr` (see `Frameworks.accelerator`)."""
        return self.frameworks.accelerator(expr)

    # -- what a call does ---------------------------------------------------------
    def role(self, call: cst.Call, loops: tuple[cst.CSTNode, ...] = ()) -> Optional[Role]:
        """What a call does; `loops` are the loops around it (`for p in params:`).

        Asked once per call and loops: the walk of a loop's own level, the walk of its
        whole body, the enclosing loops' walks, every loop that calls a helper, and the
        window questions ask again about the same calls. The entry keeps the call, so
        its id is not reused while the module is analysed."""
        key = (id(call), *map(id, loops))
        known = self._roles.get(key)
        if known is None:
            known = self._roles[key] = (call, self._role(call, loops))
        return known[1]

    def _logs_only(self, name: str) -> bool:
        """A function of the module whose body only logs (`def log_scalar(name, value, step):
        mlflow.log_metric(name, value, step=step)`): calling it logs what it is given."""
        known = self._log_wrappers.get(name)
        if known is None:
            self._log_wrappers[name] = False  # a function that calls itself logs nothing more
            function = self.facts.functions.get(name)
            body = list(function.body.body) if function is not None and type(function.body) is cst.IndentedBlock else []
            first = body[0].body[0] if body and type(body[0]) is cst.SimpleStatementLine else None
            if type(first) is cst.Expr and isinstance(first.value, (cst.SimpleString, cst.ConcatenatedString)):
                body = body[1:]  # the docstring
            known = bool(body) and all(
                type(line) is cst.SimpleStatementLine and all(
                    type(small) is cst.Expr and type(small.value) is cst.Call
                    and (found := self._role(small.value, ())) is not None and found.kind == "log" for small in line.body)
                for line in body)
            self._log_wrappers[name] = known
        return known

    def _role(self, call: cst.Call, loops: tuple[cst.CSTNode, ...]) -> Optional[Role]:
        func = call.func
        if type(func) is cst.Name:
            if func.value in _CLIP_FUNCTIONS and self.facts.qualified(func.value) != func.value:
                return None if _measures_only(call) else Role("clip", call)
            if func.value == "print" or self._logs_only(func.value):
                return Role("log", call)
            average = positional(call, 0)
            if _EMA_FUNCTIONS.match(func.value) and average is not None and (
                    self.kind_of(average) == "ema" or _given_weights(call)):
                return Role("ema", call, dotted(average), average)
            return self._called_object(call)
        if type(func) is not cst.Attribute:
            return None
        method = func.attr.value
        receiver = func.value
        receiver_name = dotted(receiver)
        qualified = self.facts.qualified(receiver_name) or ""
        if method in backward.BACKWARD.methods:
            return self._backward(call, method, receiver, receiver_name, qualified)
        # a prepared or DDP-wrapped average is reached through its `.module` (`ema.module.update_parameters(model)`)
        average = receiver.value if type(receiver) is cst.Attribute and receiver.attr.value == "module" else receiver
        if method in _EMA_METHODS and self.kind_of(average) == "ema" and not _averages_numbers(call):
            return Role("ema", call, dotted(average), average)
        if receiver_name == "self" and _EMA_FUNCTIONS.match(method) and _given_weights(call):
            average = positional(call, 0)  # `self.update_ema(ema_params, self.master_params, rate=rate)`
            return Role("ema", call, dotted(average) if average is not None else None, average)
        if method == "step":
            return self._step(call, receiver, receiver_name)
        if _is_logging(method, receiver_name):
            return Role("log", call, receiver_name)
        if method in _ZEROING_METHODS:
            if self.over_copy(receiver_name) or self.is_copy(receiver_name) or self.is_frozen(receiver_name) \
                    or self.facts.object_method(call):
                return None
            return Role("zero", call, receiver_name, receiver)
        if method in ("zero_", "detach_") and _is_grad(receiver) and _is_parameter(_grad_owner(receiver), loops):
            return Role("zero", call, receiver_name, receiver)
        if method in _CLIP_FUNCTIONS:
            return None if _measures_only(call) else Role("clip", call, receiver_name)
        kind = self.kind_of(receiver)
        if kind == "scaler" and method in ("scale", "unscale_", "update"):
            target = positional(call, 0)
            return Role(_SCALER_ROLES[method], call, receiver_name, target)
        if method in _SYNC_CONTEXTS:
            return Role("sync", call, receiver_name)
        return self._called_object(call)

    def _called_object(self, call: cst.Call) -> Optional[Role]:
        """`loss_scaler(loss, optimizer, update_grad=...)`: a call of an object of a project class
        whose `__call__` backpropagates one of its parameters is a backward of the argument
        given for it, at the call (the rest of that method is walked where the call runs)."""
        method = self.facts.called_method(call)
        if method is None or method.name.value != "__call__":
            return None
        return self._project_backward(call, method, dotted(call.func))

    def _project_backward(self, call: cst.Call, method: Optional[cst.FunctionDef], receiver: Optional[str]
                          ) -> Optional[Role]:
        """A backward of the argument a project method backpropagates (`backpropagated_parameter`)."""
        parameter = backpropagated_parameter(method)
        loss = argument_for(method, call, parameter) if method is not None and parameter is not None else None
        return Role("backward", call, receiver, loss, "project") if loss is not None else None

    def assignment_role(self, small: cst.BaseSmallStatement, loops: tuple[cst.CSTNode, ...],
                        path: tuple[cst.CSTNode, ...] = ()) -> Optional[Role]:
        """`p.grad = None` / `p.grad = torch.zeros_like(p)` over parameters is zeroing.

        `p` must be a parameter: the target of an enclosing loop over parameters
        (`for p in model.parameters():`), or named like one; `images.grad = None`
        on an input (adversarial training) is no zeroing of the model. `path`: the
        statements enclosing `small` as the loop walker entered them, which reach into
        helpers of other modules, where this module's parent links do not."""
        if type(small) is not cst.Assign or len(small.targets) != 1:
            return None
        target = small.targets[0].target
        if not (type(target) is cst.Attribute and target.attr.value == "grad"):
            return None
        value = small.value
        zeroes = (type(value) is cst.Name and value.value == "None") or (
            type(value) is cst.Call and last_part(call_name(value) or "") in ("zeros_like", "zeros")
        )
        owner = dotted(target.value)
        if not zeroes or owner is None or not _is_parameter(owner, loops):
            return None
        if self._selected_by_name(small, owner, loops, path) or self._selected_by_gradient(small, owner, loops, path) \
                or self._mirrors_other_gradient(small, owner, loops, path):
            return None
        return Role("zero", small, owner, target.value)

    def _mirrors_other_gradient(self, small: cst.BaseSmallStatement, owner: str, loops: tuple[cst.CSTNode, ...],
                                path: tuple[cst.CSTNode, ...]) -> bool:
        """`for (n, master), (_, p) in zip(opt_params, model_params): if p.grad is not None:
        master.grad.copy_(p.grad) else: master.grad = None`: a copy of gradients from one set
        of parameters to another (fp32 master weights, a CPU copy) writes None where the
        source has no gradient; it erases nothing the source accumulated. The test reads the
        gradient of another name the same loop binds."""
        for loop in loops:
            if type(loop) is not cst.For:
                continue
            names = {dotted(n) for n in walk(loop.target) if type(n) is cst.Name} - {owner, None}
            if not names:
                continue
            for enclosing in self._enclosing_within(small, loop, path):
                if type(enclosing) is cst.If and any(
                        type(node) is cst.Attribute and node.attr.value == "grad" and dotted(node.value) in names
                        for node in walk(enclosing.test)):
                    return True
        return False

    def _selected_by_gradient(self, small: cst.BaseSmallStatement, owner: str, loops: tuple[cst.CSTNode, ...],
                              path: tuple[cst.CSTNode, ...]) -> bool:
        """`for p in model.parameters(): if p.grad is not None and p.grad.sum() == 0: p.grad = None`:
        a test on the values of each parameter's gradient picks the parameters whose
        gradient is dropped (an all-zero or non-finite one, so the optimizer skips them);
        the others keep theirs: no zeroing of the window. A test only of whether the
        gradient exists (`if p.grad is not None:`) picks every parameter that has one."""
        grad = owner + ".grad"
        for loop in loops:
            if type(loop) is not cst.For or owner not in {dotted(n) for n in walk(loop.target)}:
                continue
            for enclosing in self._enclosing_within(small, loop, path):
                if type(enclosing) is cst.If and _reads_gradient_values(enclosing.test, grad):
                    return True
        return False

    def _selected_by_name(self, small: cst.BaseSmallStatement, owner: str, loops: tuple[cst.CSTNode, ...],
                          path: tuple[cst.CSTNode, ...]) -> bool:
        """`for name, p in model.named_parameters(): if "prototypes" in name: p.grad = None`:
        the assignment clears the gradients of the parameters a test on their names picks
        (freezing a head for some iterations), not the model's; no zeroing of the window.
        The same in a helper of another module (DINO's `cancel_gradients_last_layer`)."""
        for loop in loops:
            if type(loop) is not cst.For or type(loop.target) is not cst.Tuple:
                continue
            names = {dotted(element.value) for element in loop.target.elements}
            if owner not in names:
                continue
            others = names - {owner, None}
            if any(type(test) is cst.Name and test.value in others
                   for enclosing in self._enclosing_within(small, loop, path) if type(enclosing) is cst.If
                   for test in walk(enclosing.test)):
                return True
        return False

    def _enclosing_within(self, small: cst.BaseSmallStatement, loop: cst.CSTNode,
                          path: tuple[cst.CSTNode, ...]) -> tuple[cst.CSTNode, ...]:
        """The statements between `loop` and `small`: from the walker's `path` when it holds
        the loop, else from this module's parent links."""
        if any(node is loop for node in path):
            index = max(i for i, node in enumerate(path) if node is loop)
            return path[index + 1:]
        chain: list[cst.CSTNode] = []
        parent = self.facts.parents.get(id(small))
        while parent is not None and parent is not loop:
            chain.append(parent)
            parent = self.facts.parents.get(id(parent))
        return tuple(chain)

    # -- object identity -------------------------------------------------------
    def is_copy(self, name: Optional[str], scope: Optional[cst.CSTNode] = None) -> bool:
        """A model copied from another one (`fast = copy.deepcopy(model)`, `learner =
        maml.clone()`, `clone_module(model)`): a task-local model whose gradients and
        steps are not the window's. `scope`: only the bindings made in that function."""
        bindings = [b for b in self.facts.values_of(name)
                    if b.index is None and (scope is None or self.facts.enclosing_function(b.statement) is scope)]
        return bool(bindings) and all(_copies(b.value) and self._made_per_iteration(b.statement) for b in bindings)

    def is_frozen(self, name: Optional[str]) -> bool:
        """A model the module freezes (`model_fea.requires_grad_(False)`: a feature extractor,
        a teacher, a VAE) and never unfreezes, as far as the module shows: every
        `requires_grad_` call on it passes False, no other `requires_grad_(...)` call may reach
        it (one on another plain name does not), and every `p.requires_grad = True` runs in a
        loop over another named model's parameters. Its parameters hold no gradients, so its
        `zero_grad()` erases nothing of the window's."""
        if name is None:
            return False
        frozen = False
        for call in self.facts.calls_named("requires_grad_"):
            func = call.func
            if type(func) is not cst.Attribute:
                continue
            owner = dotted(func.value)
            if owner == name:
                if not (len(call.args) == 1 and dotted(call.args[0].value) == "False"):
                    return False
                frozen = True
            elif owner is None and name in code(func.value):
                return False  # `model_fea.blocks[-1].requires_grad_(True)`
        return frozen and not any(self._unfreezes(binding, name) for target, bindings in self.facts.bindings.items()
                                  if target.endswith(".requires_grad") for binding in bindings)

    def _unfreezes(self, store: Binding, name: str) -> bool:
        """`p.requires_grad = <not False>` that may reach `name`'s parameters: anywhere but in a
        loop over the `parameters()` or `named_parameters()` of a model that is neither
        `name`, nor part of it, nor holds it."""
        if dotted(store.value) == "False":
            return False
        parent = self.facts.parents.get(id(store.statement))
        while parent is not None and type(parent) is not cst.For:
            parent = self.facts.parents.get(id(parent))
        if parent is None:
            return True
        walked = parent.iter
        if type(walked) is cst.Call and type(walked.func) is cst.Attribute \
                and walked.func.attr.value in ("parameters", "named_parameters"):
            owner = dotted(walked.func.value)  # `encoder.head.parameters()` reaches `encoder`'s
            return owner is None or owner == name or owner.startswith(name + ".") or name.startswith(owner + ".")
        return True

    def _made_per_iteration(self, statement: cst.CSTNode, depth: int = 0) -> bool:
        """Bound inside a loop, or in a function called from inside one (a per-task
        `adapt(...)` helper): a copy made once before training (`model = deepcopy(base)`)
        is the model that trains, not a task-local one."""
        parent = self.facts.parents.get(id(statement))
        while parent is not None and type(parent) not in (cst.FunctionDef, cst.ClassDef):
            if type(parent) in (cst.For, cst.While):
                return True
            parent = self.facts.parents.get(id(parent))
        if type(parent) is not cst.FunctionDef or depth > 1:
            return False
        return any(self._made_per_iteration(call, depth + 1) for call in call_sites(self.facts, parent))

    def over_copy(self, optimizer: Optional[str]) -> bool:
        """An optimizer built over a copied model's parameters (an inner-loop optimizer of
        meta-learning or per-sample adaptation): not the window's optimizer."""
        for binding in self.facts.values_of(optimizer):
            value = binding.value
            if binding.index is not None or self.built_kind(value, None) != "optimizer":
                continue
            built = cast(cst.Call, value)  # an optimizer is built by a call
            params = keyword(built, "params")
            params_value = params.value if params is not None else positional(built, 0)
            scope = self.facts.enclosing_function(binding.statement)
            if params_value is not None and any(self.is_copy(name, scope) for name in _read_names(params_value)):
                return True
        return False

    def runs_on_copy(self, loss: Optional[cst.BaseExpression]) -> bool:
        """A loss computed by a copied model (`F.mse_loss(fast(x), y)`), inline or through
        a name every binding of which is such a loss: its backward fills the copy's gradients."""
        if loss is None:
            return False
        if self._calls_copy(loss):
            return True
        name = dotted(loss)
        bindings = [b for b in self.facts.values_of(name) if b.index is None] if name is not None else []
        return bool(bindings) and all(self._calls_copy(b.value) for b in bindings)

    def _calls_copy(self, expr: cst.BaseExpression) -> bool:
        return any(type(node) is cst.Call and type(node.func) is cst.Name and self.is_copy(node.func.value)
                   for node in walk(expr))

    def _backward(self, call: cst.Call, method: str, receiver: cst.BaseExpression, receiver_name: Optional[str],
                  qualified: str) -> Optional[Role]:
        """A backward call (`backward.BACKWARD`: the gate reads the same table), and who runs it."""
        forms = backward.BACKWARD
        if not forms.is_backward(method, receiver_name):  # the class's own method
            return None
        flavor = forms.method_flavors.get(method)
        if flavor is None:
            flavor = next((f for module, f in forms.module_flavors.items() if qualified.endswith(module)), None)
        if flavor is None:
            flavor = forms.receiver_flavors.get(self.kind_of(receiver) or "")
        if flavor is not None:
            return Role("backward", call, receiver_name, positional(call, 0), cast(Flavor, flavor))
        if self.runs_on_copy(receiver):
            return None
        if method == "backward" and positional(call, 0) is not None and self._fp16_optimizer(receiver_name):
            # apex's `FP16_Optimizer.backward(loss)`: the loss's own backward, at the optimizer's loss scale
            return Role("backward", call, receiver_name, positional(call, 0), "tensor")
        project = self._project_backward(call, self.facts.called_method(call), receiver_name) if call.args else None
        if project is not None:
            return project
        return Role("backward", call, receiver_name, receiver, "tensor")

    def _fp16_optimizer(self, name: Optional[str]) -> bool:
        """Some binding of `name` wraps an optimizer in apex's (or pytorch-pretrained-bert's)
        `FP16_Optimizer`, whose `backward(loss)` scales the loss and backpropagates it; another
        object's `backward(loss)` (a third party's optimizer manager) does what its library does."""
        return name is not None and any(
            type(b.value) is cst.Call and last_part(call_name(b.value) or "") == "FP16_Optimizer"
            for b in self.facts.values_of(name))

    def _step(self, call: cst.Call, receiver: cst.BaseExpression, receiver_name: Optional[str]) -> Optional[Role]:
        kind = self.kind_of(receiver)  # None for a plain project object: the walk follows its `step`
        if kind == "optimizer" and self.over_copy(receiver_name):
            return None
        if kind == "optimizer":
            closure = keyword(call, "closure")
            closure_value = closure.value if closure is not None else positional(call, 0)
            return Role("step", call, receiver_name, receiver, closure=closure_value)
        if kind == "scaler":
            return Role("step", call, receiver_name, positional(call, 0), "scaler")
        if kind == "engine":
            return Role("step", call, receiver_name, receiver, "engine")
        if kind == "scheduler":
            return Role("sched", call, receiver_name, receiver)
        return None


_COPYING = {"deepcopy", "clone_module", "clone"}


def _copies(value: cst.BaseExpression) -> bool:
    """`copy.deepcopy(model)`, `clone_module(model)`, `maml.clone()`."""
    return type(value) is cst.Call and last_part(call_name(value) or "") in _COPYING


def _read_names(expr: cst.BaseExpression) -> set[str]:
    """The plain names an expression reads (`fast` in `fast.parameters()`)."""
    return {node.value for node in walk(expr) if type(node) is cst.Name}


def _measures_only(clip: cst.Call) -> bool:
    """`clip_grad_norm_(params, float("inf"))`: an infinite threshold (or none, `None`) clips
    nothing; the call only measures the gradients' norm (for logging), wherever it runs."""
    threshold = keyword(clip, "max_norm") or keyword(clip, "clip_value")
    value = threshold.value if threshold is not None else positional(clip, 1)
    if value is None:
        return False
    if type(value) is cst.Name and value.value == "None":
        return True  # `commons.clip_grad_value_(params, None)` (VITS and its family): the norm, unclipped
    if type(value) is cst.Call and call_name(value) == "float" and len(value.args) == 1:
        return (string_value(value.args[0].value) or "").lower() in ("inf", "+inf", "infinity")
    return (dotted(value) or "") in ("math.inf", "torch.inf", "np.inf", "numpy.inf")


def _given_weights(update: cst.Call) -> bool:
    """A call of a function named for an EMA update (`update_ema(target_params,
    source_params, rate)`, guided diffusion's) that is handed parameters (a name or call
    that says so: `self.master_params`, `model.parameters()`) and no Python number or key:
    it moves an average of the weights."""
    if _averages_numbers(update):
        return False
    return any("param" in code(arg.value).lower() for arg in update.args if arg.keyword is None)


def _averages_numbers(update: cst.Call) -> bool:
    """`loss_ema.update(d_real.mean().item(), "D_real", step)`: an average fed a Python number
    (`.item()`) or a string key tracks a statistic such as a loss, not the weights; its pace
    does not change the model. (A number literal may be the decay: `ema.update(model, 0.999)`.)"""
    for arg in update.args:
        value = arg.value
        if type(value) is cst.SimpleString and arg.keyword is None:
            return True
        if type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value == "item":
            return True
    return False


def _is_logging(method: str, receiver: Optional[str]) -> bool:
    """`logger.info(...)`, `wandb.log(...)`, `writer.add_scalar(...)`, `pbar.set_postfix(...)`,
    `accelerator.print(...)`, `tqdm.write(...)`."""
    if receiver is None:
        return False
    head, tail = receiver.split(".")[0], last_part(receiver)
    if method in _METRIC_METHODS:
        return True
    if method in _LOG_METHODS and (_LOG_RECEIVERS.match(tail) or _LOG_RECEIVERS.match(head)):
        return True
    if method == "print" and (_LOG_RECEIVERS.match(tail) or tail in _PRINTING_FRAMEWORKS):
        return True  # `logger.print(...)`, `accelerator.print(...)`: print on one process
    if method == "write" and tail == "tqdm":
        return True  # `tqdm.write(...)`: a print that keeps the progress bar
    if method in ("append", "write") and _LOGGER_OBJECT.match(tail):
        return True  # a project's own logger object (`self.logger.append("... loss = %.5f" % ...)`)
    # `wandb.log`, and a wandb run or logger object (`wandb_run.log`, `self.wandb_logger.log`)
    return method in ("log", "log_dict") and (
        head in _LOG_FRAMEWORKS or tail in _LOG_FRAMEWORKS or "wandb" in tail.lower())


_PARAMETER_NAME = LazyPattern(r"^(p|param|params?_?\w*|\w*_param|parameter|weight|w)$", re.IGNORECASE)


def _is_parameter(name: str, loops: tuple[cst.CSTNode, ...]) -> bool:
    for loop in loops:
        if type(loop) is cst.For and dotted(loop.target) == name:
            return "param" in code(loop.iter).lower() or bool(_PARAMETER_NAME.match(name))
    return bool(_PARAMETER_NAME.match(last_part(name)))


def _reads_gradient_values(test: cst.BaseExpression, grad: str) -> bool:
    """`test` reads the values of the gradient `grad` (`p.grad.sum() == 0`,
    `torch.isfinite(p.grad).all()`), beyond asking whether it exists (`p.grad is None`)."""
    uses = sum(1 for node in walk(test) if type(node) is cst.Attribute and dotted(node) == grad)
    presence = sum(
        1 for node in walk(test)
        if type(node) is cst.Comparison and dotted(node.left) == grad and len(node.comparisons) == 1
        and type(node.comparisons[0].operator) in (cst.Is, cst.IsNot)
        and dotted(node.comparisons[0].comparator) == "None")
    return uses > presence


def _grad_owner(node: cst.BaseExpression) -> str:
    """`p.grad.data` -> "p"."""
    name = dotted(node) or ""
    return name[: -len(".data")][: -len(".grad")] if name.endswith(".grad.data") else name[: -len(".grad")]


def _is_grad(node: cst.BaseExpression) -> bool:
    """`p.grad` or `p.grad.data`."""
    name = dotted(node) or ""
    return name.endswith(".grad") or name.endswith(".grad.data")


def backpropagated_parameter(method: Optional[cst.FunctionDef]) -> Optional[str]:
    """The parameter a method of a project class backpropagates (`def backward(self, loss)`,
    a loss scaler's `def __call__(self, loss, optimizer, ..., update_grad=True)`): every
    backward in its body runs on that one parameter, at most multiplied (a mixed-precision
    loss scale, `self._scaler.scale(loss)`), and the method divides nothing. A call of it is
    a backward of the argument given for that parameter. None otherwise: unknown."""
    if method is None:
        return None
    names = parameters(method)
    if len(names) < 2 or names[0] != "self":
        return None
    found: Optional[str] = None
    for node in walk(method.body):
        if type(node) is cst.BinaryOperation and type(node.operator) is cst.Divide:
            return None
        if type(node) is not cst.Call or type(node.func) is not cst.Attribute or node.func.attr.value != "backward":
            continue
        receiver = _unscaled(node.func.value, names)
        name = dotted(receiver)
        if name not in names[1:] or (found is not None and name != found):
            return None
        found = name
    return found


def _unscaled(receiver: cst.BaseExpression, names: list[str]) -> cst.BaseExpression:
    """What a backward runs on under its loss scale: `loss * 2 ** self.log_scale` and
    `self._scaler.scale(loss)` -> `loss`."""
    while True:
        if type(receiver) is cst.BinaryOperation and type(receiver.operator) is cst.Multiply:
            left = receiver.left
            receiver = left if dotted(left) in names or type(left) in (cst.BinaryOperation, cst.Call) else receiver.right
        elif (type(receiver) is cst.Call and type(receiver.func) is cst.Attribute and receiver.func.attr.value == "scale"
              and len(receiver.args) == 1 and receiver.args[0].keyword is None and not receiver.args[0].star):
            receiver = receiver.args[0].value
        else:
            return receiver


def _parameter_annotations(module: cst.CSTNode) -> dict[str, list[Optional[cst.BaseExpression]]]:
    """Parameter name -> the annotations the module's functions give it (`engine: Engine`); a
    parameter without one adds None, which no class names."""
    found: dict[str, list[Optional[cst.BaseExpression]]] = {}
    for node in walk(module):
        if type(node) is cst.Param:
            found.setdefault(node.name.value, []).append(node.annotation.annotation if node.annotation else None)
    return found
