"""The loop model on the shapes of real code.

Fixtures under fixtures/check/ prove each shape through the rules; these tests
pin what the model itself answers, and that no input makes name resolution
recurse without end (each would hang or raise RecursionError without its fix).
"""

from __future__ import annotations

import signal
import sys
import textwrap
from contextlib import contextmanager
from pathlib import Path

import libcst
import pytest
from silence import assert_silent

from accumlint.check.analysis import AnalysisOptions
from accumlint.model.build import windows_of
from accumlint.model.gates import parse_gate
from accumlint.model.names import code
from accumlint.model.positions import positions_of

REPO = Path(__file__).resolve().parent.parent


def _windows(source: str):
    text = textwrap.dedent(source)
    return windows_of(libcst.parse_module(text), text, AnalysisOptions())


@contextmanager
def _bounded(recursion_limit: int = 400, seconds: int = 20):
    """A small recursion limit (an endless recursion fails at once) and an alarm (an
    endless loop fails instead of hanging the suite)."""

    def expire(signum, frame):
        raise TimeoutError("analysis did not finish")

    previous_limit = sys.getrecursionlimit()
    previous_handler = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    sys.setrecursionlimit(recursion_limit)
    try:
        yield
    finally:
        sys.setrecursionlimit(previous_limit)
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous_handler)


def _analyze_bounded(source: str):
    text = textwrap.dedent(source)
    module = libcst.parse_module(text)  # parsing itself needs the normal limit
    from accumlint.check.analysis import find

    with _bounded():
        return [located.diagnostic for located in find(module, text, "x.py", AnalysisOptions())]


# -- cycle-safe name resolution ----------------------------------------------------

SWAPPED_PREPARE = """
from accelerate import Accelerator

accelerator = Accelerator()
model = build_model()
opt = make(model)
opt, model = accelerator.prepare(model, opt)
for batch in loader:
    loss = model(batch).mean()
    accelerator.backward(loss)
    opt.step()
    opt.zero_grad()
"""

ATTRIBUTES_FROM_EACH_OTHER = """
class Trainer:
    def swap_in_ema(self):
        self.accelerator = self.ema_accelerator
        self.ema_accelerator = self.accelerator

    def restore(self):
        self.scaler = self.amp_scaler
        self.amp_scaler = self.scaler

    def fit(self, loader):
        for batch in loader:
            loss = self.model(batch).mean()
            self.accelerator.backward(self.scaler.scale(loss))
            self.optimizer.step()
            self.optimizer.zero_grad()
"""


def _same_name_in_many_methods(methods: int) -> str:
    """`self.optimizer` rebound from, and into, a different attribute in each method."""
    body = ["class Trainer:"]
    for index in range(methods):
        body += [
            f"    def phase_{index}(self, batch):",
            f"        self.optimizer = self.opt_{index}",
            f"        self.opt_{index} = self.optimizer",
            "        optimizer = self.optimizer",
            "        for micro in batch:",
            "            loss = self.model(micro).mean()",
            "            loss.backward()",
            "        optimizer.step()",
        ]
    return "\n".join(body) + "\n"


LOOP_OVER_MODELS = """
import torch

models = [build(i) for i in range(4)]
optimizers = [torch.optim.SGD(m.parameters(), lr=0.1) for m in models]
for model in models:
    model = model.cuda()
for step, batch in enumerate(loader):
    for model, optimizer in zip(models, optimizers):
        loss = model(batch).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
"""


@pytest.mark.parametrize(
    "source",
    [SWAPPED_PREPARE, ATTRIBUTES_FROM_EACH_OTHER, _same_name_in_many_methods(40), LOOP_OVER_MODELS],
    ids=["swapped-prepare", "attributes-from-each-other", "same-name-in-40-methods", "loop-over-models"],
)
def test_name_resolution_ends(source: str) -> None:
    _analyze_bounded(source)


def test_swapped_prepare_leaves_both_names_unknown_but_checks_the_loop() -> None:
    (window,) = _windows(SWAPPED_PREPARE)
    assert [e.kind for e in window.loop.events] == ["backward", "step", "zero"]


# -- exclusive branches ------------------------------------------------------------

BRANCHES = """
import torch
for step, batch in enumerate(loader):
    loss = model(batch).mean() / accum
    try:
        loss.backward()
    except RuntimeError:
        optimizer.zero_grad()
    if not torch.isfinite(loss):
        optimizer.zero_grad()
    elif (step + 1) % accum == 0:
        optimizer.step()
    else:
        log(loss)
    match mode:
        case "a":
            scheduler.step()
        case _:
            optimizer.zero_grad()
"""


def test_arms_of_one_branch_are_never_ordered() -> None:
    (window,) = _windows(BRANCHES)
    backward, zero_except, zero_nonfinite, step, sched, zero_case = window.loop.events
    assert backward.kind == "backward" and step.kind == "step" and sched.kind == "sched"
    assert not backward.precedes(zero_except) and backward.statement.exclusive_with(zero_except.statement)
    assert backward.precedes(zero_nonfinite) and backward.precedes(step)
    assert not zero_nonfinite.precedes(step) and zero_nonfinite.statement.exclusive_with(step.statement)
    assert step.precedes(sched) and step.precedes(zero_case)
    assert sched.statement.exclusive_with(zero_case.statement)


# -- counters and count gates --------------------------------------------------------



def test_length_of_a_list_is_a_counter() -> None:
    """`len(losses) % K == 0`, with one append per micro-batch, is a modulo gate on the
    list's length; another call is no counter."""
    gate = parse_gate(libcst.parse_expression("len(losses) % args.gradient_accumulation_steps == 0"), lambda n: None)
    assert gate is not None and gate.kind == "modulo" and gate.counter == "len(losses)"
    assert parse_gate(libcst.parse_expression("count(losses) % k == 0"), lambda n: None) is None

def test_difference_count_gate_needs_the_remembered_step() -> None:
    gate = parse_gate(libcst.parse_expression("ni - last_opt_step >= accumulate"), lambda name: None)
    assert gate is not None and gate.kind == "count" and gate.counter == "ni" and gate.since == "last_opt_step"
    remembered = _windows("""
    for epoch in range(epochs):
        for i, batch in enumerate(loader):
            ni = i + nb * epoch
            model(batch).sum().backward()
            if ni - last_opt_step >= accumulate:
                optimizer.step()
                last_opt_step = ni
    """)
    forgotten = _windows("""
    for epoch in range(epochs):
        for i, batch in enumerate(loader):
            ni = i + nb * epoch
            model(batch).sum().backward()
            if ni - warmup_start >= accumulate:
                optimizer.step()
    """)
    assert remembered[0].gated_step and remembered[0].loop.derived_counters == {"ni"}
    assert not forgotten[0].gated_step


def test_only_an_epoch_multiple_keeps_the_index_base() -> None:
    (window,) = _windows("""
    for epoch in range(epochs):
        for i, batch in enumerate(loader):
            ni = i + nb * epoch
            resumed = i + start_iter
            model(batch).sum().backward()
    """)
    assert window.loop.derived_counters == {"ni"}


# -- micro-step loops in per-step functions --------------------------------------------


def test_per_step_function_is_one_window_with_its_micro_loop() -> None:
    windows = _windows("""
    class Actor:
        def update_policy(self, batch):
            self.optimizer.zero_grad()
            for micro in batch.split(4):
                (self.model(micro).mean() / 4).backward()
            self.optimizer.step()
    """)
    (window,) = windows
    assert window.loop.per_step_function and window.has_micro_loop
    assert [e.kind for e in window.loop.events] == ["zero", "backward", "step"]


def test_a_loop_with_its_own_backward_is_no_micro_step_window() -> None:
    windows = _windows("""
    def train(loader):
        for x, y in loader:
            for _ in range(7):
                attack(x).backward()
            model(x).mean().backward()
            optimizer.step()
    """)
    assert all(w.loop.micro_loop is None for w in windows)


# -- zeroing forms and closure steps -----------------------------------------------------


def test_parameter_zeroing_assignments_and_not_input_gradients() -> None:
    (window,) = _windows("""
    for x in loader:
        delta.grad = None
        x.grad.zero_()
        model(x + delta).mean().backward()
        optimizer.step()
        for p in model.parameters():
            p.grad = None
        for name, w in model.named_parameters():
            w.grad = torch.zeros_like(w)
    """)
    zeros = window.loop.of_kind("zero")
    assert [type(e.role.call).__name__ for e in zeros] == ["Assign", "Assign"]


def test_closure_step_is_a_whole_update() -> None:
    assert_silent("""
    import torch
    optimizer = torch.optim.LBFGS(model.parameters())
    for x, y in loader:
        loss = model(x).mean()
        loss.backward()
        optimizer.zero_grad()
        optimizer.step(lambda: closure(x, y))
    """, path="x.py")


# -- loops walked at their own level first ------------------------------------------------

EPOCHS_OVER_BATCHES = """
def train(loader, epochs):
    step = 0
    for epoch in range(epochs):
        model.train()
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y) / 4
            loss.backward()
            if (i + 1) % 4 == 0:
                optimizer.step()
                optimizer.zero_grad()
        scheduler.step()
"""


def _loop_summary(loops, facts, objects) -> list:
    """What a TrainingLoop holds, nodes by identity, Statements by their fields, and where
    its window reads each counter's increment (the loop's and its gates' counters)."""
    from accumlint.model.window import Window

    def increments(loop) -> dict:
        window = Window(loop, facts, objects)
        counters = {loop.counter, *(gate.counter for gate in loop.gates)} - {None}
        return {name: getattr(window.increment_of(name), "order", None) for name in sorted(counters)}

    return [
        (
            id(loop.node), id(loop.micro_loop), loop.counter, loop.counter_base, sorted(loop.derived_counters),
            id(loop.iterable), increments(loop),
            [
                (id(s.node), s.order, repr(s.gate), id(s.gate_if), s.conditional, [id(n) for n in s.loops],
                 [id(n) for n in s.withs], [id(n) for n in s.block], id(s.call_site), id(s.helper), s.arms,
                 [(e.kind, id(e.role.call)) for e in s.events])
                for s in loop.statements
            ],
        )
        for loop in loops
    ]


def _loops_both_ways(text: str, monkeypatch: pytest.MonkeyPatch):
    """build_loops as it runs, then with every loop walked whole from the start."""
    from accumlint.model import loop as loop_model
    from accumlint.model.facts import collect_facts
    from accumlint.model.roles import Objects

    module = libcst.parse_module(text)
    facts = collect_facts(module, text)
    objects = Objects(facts)
    shortcut = _loop_summary(loop_model.build_loops(facts, objects), facts, objects)
    whole = loop_model._Walker.__init__

    def always_whole(self, *args, own_level: bool = False, **kwargs) -> None:
        whole(self, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(loop_model._Walker, "__init__", always_whole)
        facts = collect_facts(module, text)
        objects = Objects(facts)
        walked_whole = _loop_summary(loop_model.build_loops(facts, objects), facts, objects)
    return shortcut, walked_whole


def test_an_epoch_loop_without_a_backward_of_its_own_is_not_walked_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    from accumlint.model import loop as loop_model

    walked: list[tuple[int, bool]] = []
    plain_walk = loop_model._Walker.walk

    def recording(self, body, root=None):
        walked.append((id(body), self.own_level))
        return plain_walk(self, body, root)

    monkeypatch.setattr(loop_model._Walker, "walk", recording)
    (window,) = _windows(EPOCHS_OVER_BATCHES)
    epoch_loop = window.loop.site.ancestors[-2]
    assert type(epoch_loop) is libcst.For and epoch_loop.target.value == "epoch"
    assert (id(epoch_loop.body), False) not in walked  # its own level told it holds no backward
    assert (id(epoch_loop.body), True) in walked and (id(window.loop.node.body), True) in walked


@pytest.mark.parametrize("path", sorted((REPO / "fixtures").rglob("*.py")), ids=lambda p: p.name)
def test_walking_own_levels_first_builds_the_same_loops(path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = path.read_text(encoding="utf-8")
    shortcut, walked_whole = _loops_both_ways(text, monkeypatch)
    assert shortcut == walked_whole


def test_walking_own_levels_first_builds_the_same_micro_step_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    """The window is the enclosing loop: it is walked whole, once, when its inner loop asks."""
    text = textwrap.dedent("""
    for batch in loader:
        for micro in batch.chunk(4):
            (model(micro).mean() / 4).backward()
        optimizer.step()
        optimizer.zero_grad()
    """)
    shortcut, walked_whole = _loops_both_ways(text, monkeypatch)
    assert shortcut == walked_whole and len(shortcut) == 1 and shortcut[0][1] != id(None)


@pytest.mark.parametrize("weighted, reduction", [
    ("loss * x.size(0) / global_batch_size", "sum"),
    ("loss * len(x) / global_batch_size", "sum"),
    ("loss * micro_batch_size / global_batch_size", "sum"),
    ("loss * x.shape[0] / global_batch_size", "sum"),
    ("loss / global_batch_size", "mean"),
    ("loss * 2.0 / global_batch_size", "mean"),
    ("loss * x.size(1) / global_batch_size", "mean"),
])
def test_a_mean_loss_weighted_by_the_micro_batch_size_is_a_sum_over_its_samples(weighted: str, reduction: str) -> None:
    assert _only_flow(f"({weighted}).backward()").reduction == reduction


def _only_flow(backward: str):
    """The loss flow of a plain accumulation loop whose backward statement is `backward`."""
    (window,) = _windows(f"""
        import torch
        import torch.nn.functional as F

        def train(model, loader, opt, K, micro_batch_size, global_batch_size):
            for i, (x, y) in enumerate(loader):
                loss = F.mse_loss(model(x), y)
                {backward}
                if (i + 1) % K == 0:
                    opt.step()
                    opt.zero_grad()
    """)
    (flow,) = window.flows
    return flow


@pytest.mark.parametrize("backward, reduction", [
    ("loss.backward(gradient=torch.full_like(loss, 1.0 / K))", "unknown"),
    ("loss.backward(torch.ones_like(loss))", "unknown"),
    ("torch.autograd.backward(loss, grad_tensors=torch.tensor(1.0 / K))", "unknown"),
    ("loss.backward()", "mean"),
    ("torch.autograd.backward(loss)", "mean"),
])
def test_a_backward_seeded_with_a_gradient_has_the_seed_s_scale(backward: str, reduction: str) -> None:
    assert _only_flow(backward).reduction == reduction


@pytest.mark.parametrize("header, signature, single", [
    ("K = 1", "", True),
    ("K = 4", "", False),
    ("K = 1\nK = 4", "", False),
    ("K = 1\nexec(open('configurator.py').read())", "", False),
    ("K = 1\nglobals().update(overrides)", "", False),
    ("", ", K=1", False),
])
def test_k_known_to_be_one_makes_a_window_of_one_micro_batch(header: str, signature: str, single: bool) -> None:
    (window,) = _windows(header + f"""

def train(model, loader, opt{signature}):
    for i, (x, y) in enumerate(loader):
        loss = model(x, y)
        loss.backward()
        if (i + 1) % K == 0:
            opt.step()
            opt.zero_grad()
""")
    assert window.single_micro_batch is single


@pytest.mark.parametrize("clip, clips", [
    ("torch.nn.utils.clip_grad_norm_(model.parameters(), float('inf'))", False),
    ("torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=math.inf)", False),
    ("accelerator.clip_grad_norm_(model.parameters(), torch.inf)", False),
    ("torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)", True),
    ("torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=args.max_norm)", True),
    ("torch.nn.utils.clip_grad_value_(model.parameters(), clip_value=float('inf'))", False),
])
def test_a_clip_with_an_infinite_threshold_only_measures(clip: str, clips: bool) -> None:
    (window,) = _windows(f"""
        import math
        import torch

        def train(model, loader, opt, K, args, accelerator):
            for i, (x, y) in enumerate(loader):
                loss = model(x, y) / K
                loss.backward()
                norm = {clip}
                if (i + 1) % K == 0:
                    opt.step()
                    opt.zero_grad()
    """)
    assert any(event.role.kind == "clip" for s in window.loop.statements for event in s.events) is clips


# -- a Trainer's compute_loss and the Trainer's own K ----------------------------------------

def _compute_loss(body: str) -> libcst.FunctionDef:
    function = libcst.parse_statement(
        "def compute_loss(self, model, inputs, return_outputs=False):\n"
        "    outputs = model(**inputs)\n"
        + textwrap.indent(body, "    ")
        + "    return loss\n"
    )
    assert type(function) is libcst.FunctionDef
    return function


def test_a_division_by_the_trainer_k_in_compute_loss_is_found() -> None:
    from accumlint.model.trainers import division_by_trainer_k

    function = _compute_loss("loss = outputs.loss\nloss = 2 * loss / self.args.gradient_accumulation_steps\n")
    division = division_by_trainer_k(function)
    assert division is not None
    assert libcst.Module([]).code_for_node(division) == "2 * loss / self.args.gradient_accumulation_steps"


@pytest.mark.parametrize("body", [
    "loss = outputs.loss\n",
    "loss = outputs.loss / self.args.per_device_train_batch_size\n",
    "loss = outputs.loss * self.args.gradient_accumulation_steps\n",
    "loss = self.args.gradient_accumulation_steps / outputs.loss\n",
    "loss = outputs.loss / args.gradient_accumulation_steps\n",
])
def test_no_division_by_the_trainer_k_in_compute_loss(body: str) -> None:
    from accumlint.model.trainers import division_by_trainer_k

    assert division_by_trainer_k(_compute_loss(body)) is None


# -- what the helpers a loop statement calls do there -------------------------------------

HELPER_CALLS = """
import torch
import wandb

def clip(model):
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    wandb.log({"clipped": 1})

def report(loss):
    wandb.log({"loss": loss.item()})

for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / 4
    loss.backward()
    clip(model)
    report(loss)
    optimizer.step()
    optimizer.zero_grad()
"""


def _helper_kinds_by_line() -> dict[str, set]:
    (window,) = _windows(HELPER_CALLS)
    return {libcst.Module([]).code_for_node(s.node).strip(): window.helper_event_kinds(s)
            for s in window.loop.statements if s.helper is None}


def test_a_call_of_a_helper_that_clips_makes_a_clip_there() -> None:
    assert _helper_kinds_by_line()["clip(model)"] == {"clip"}  # its logging goes along


@pytest.mark.parametrize("line", ["report(loss)", "loss.backward()", "optimizer.step()",
                                  "loss = criterion(model(x), y) / 4"])
def test_a_statement_that_calls_no_working_helper_makes_nothing_there(line: str) -> None:
    assert _helper_kinds_by_line()[line] == set()


@pytest.mark.parametrize("test, discards", [
    ("math.isnan(grad_norm)", True),
    ("not torch.isfinite(loss).all()", True),
    ("grad_norm.isinf().any()", True),
    ("not is_finite", True),
    ("scaler.found_inf", True),
    ("has_inf_or_nan", True),
    ("not grad_is_finite", True),
    ("grad_norm > max_norm", False),
    ("infer_steps > 3", False),  # a name that only begins like a flag word
    ("args.reset_each_step", False),
])
def test_a_zeroing_under_a_test_of_non_finite_values_is_a_discard(test: str, discards: bool) -> None:
    (window,) = _windows(f"""\
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y) / K
            loss.backward()
            if {test}:
                optimizer.zero_grad()
            if (i + 1) % K == 0:
                optimizer.step()
                optimizer.zero_grad()
        """)
    zeroing = window.loop.of_kind("zero")[0]
    assert zeroing.gate is None  # modelled: the discard is the first zeroing, outside the window's gate
    assert window.under_non_finite_test(zeroing.statement) is discards


def test_a_zeroing_between_phases_of_an_accumulate_block_is_followed_by_its_optimizers_step() -> None:
    (window,) = _windows("""\
        accelerator = Accelerator(gradient_accumulation_steps=4)
        model, critic, opt, opt_c, loader = accelerator.prepare(model, critic, opt, opt_c, loader)
        for x, y in loader:
            with accelerator.accumulate(model, critic):
                accelerator.backward(rec_loss(model(x), y))
                opt.step()
                opt.zero_grad()
                accelerator.backward(adv_loss(critic(model(x))))
                opt.step()
                opt.zero_grad()
                accelerator.backward(critic_loss(critic(y)))
                opt_c.step()
                opt_c.zero_grad()
        """)
    first, second, critic_zero = window.loop.of_kind("zero")
    assert [code(e.role.call) for e in window.loop.of_kind("step")] == ["opt.step()", "opt.step()", "opt_c.step()"]
    assert window.zeroes_before_restep(first) is window.loop.of_kind("step")[1]
    assert window.zeroes_before_restep(second) is None  # the critic's backward follows, but `opt` never steps again
    assert window.zeroes_before_restep(critic_zero) is None


@pytest.mark.parametrize("between, paired", [("", True), ("i += 1\n", False)])
def test_an_if_and_a_sibling_with_the_negated_gate_are_exclusive_arms(between: str, paired: bool) -> None:
    (window,) = _windows(
        "for i, (x, y) in enumerate(loader):\n"
        "    if i % K != 0:\n"
        "        with model.no_sync():\n"
        "            (criterion(model(x), y) / K).backward()\n"
        + (f"    {between}" if between else "")
        + "    if i % K == 0:\n"
        "        (criterion(model(x), y) / K).backward()\n"
        "        optimizer.step()\n"
        "        optimizer.zero_grad()\n"
    )
    inside, closing = window.loop.backwards
    step = window.loop.of_kind("step")[0]
    assert inside.statement.exclusive_with(closing.statement) is paired
    if paired:
        assert step.gate is not None and step.gate.paired and window.gated_step


@pytest.mark.parametrize("condition, world", [
    ("not is_deepspeed and i % K == 0", True),  # a flag the loop never rebinds picks the world
    ("args.native and i % K == 0", True),
    ("finite and i % K == 0", False),  # computed on every micro-batch
    ("i % K == 0 and i > 0", False),  # reads the count itself
])
def test_a_gate_condition_that_only_picks_a_world(condition: str, world: bool) -> None:
    (window,) = _windows(f"""\
        def train(model, optimizer, loader, K, is_deepspeed, args):
            for i, batch in enumerate(loader):
                loss = model(batch).mean() / K
                loss.backward()
                finite = bool(loss.isfinite())
                if {condition}:
                    optimizer.step()
                    optimizer.zero_grad()
        """)
    gate = window.step_gate
    assert gate is not None and window.world_condition(gate) is world


@pytest.mark.parametrize("steps, one", [
    ('"gradient_accumulation_steps": 1', True),
    ('"gradient_accumulation_steps": args.accum', False),
    ('"gradient_accumulation_steps": 4', False),
])
def test_a_deepspeed_engine_built_with_one_step(steps: str, one: bool) -> None:
    (window,) = _windows(f"""\
        import deepspeed

        def config(args):
            return {{"train_micro_batch_size_per_gpu": 8, {steps}}}

        def train(args, model, loader):
            engine, _, _, _ = deepspeed.initialize(model=model, config=config(args))
            for step in range(args.steps):
                for micro in range(args.accum):
                    loss = engine(next(loader)).mean() / args.accum
                    engine.backward(loss)
                engine.step()
        """)
    assert window.engine_k_is_one is one


@pytest.mark.parametrize("first, reported_line", [
    ("teacher", 12),  # the teacher's own update runs first: the student's backward is the wrap's
    ("student", 7),
])
def test_the_backward_of_the_wrapped_model(first: str, reported_line: int) -> None:
    teacher = ["    t_loss = teacher(x).mean() / K", "    t_loss.backward()",
               "    if (i + 1) % K == 0:", "        t_opt.step()", "        t_opt.zero_grad()"]
    student = ["    s_loss = student(x).mean() / K", "    s_loss.backward()",
               "    if (i + 1) % K == 0:", "        s_opt.step()", "        s_opt.zero_grad()"]
    body = teacher + student if first == "teacher" else student + teacher
    source = "\n".join([
        "from torch.nn.parallel import DistributedDataParallel as DDP",
        "",
        "student = DDP(build_student())",
        "teacher = build_teacher()",
        "for i, x in enumerate(loader):",
        *body,
    ]) + "\n"
    module = libcst.parse_module(source)
    (window,) = windows_of(module, source, AnalysisOptions())
    backward = window.backward_of("student")
    assert backward is not None
    line = positions_of(module, [backward.role.call], source)[backward.role.call].start.line
    assert line == reported_line
