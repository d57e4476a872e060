"""What a backward call is: one table, read by the text gate and the loop model.

A backward pass is a method call: `loss.backward()`, `accelerator.backward(loss)`,
`engine.backward(loss)`, `fabric.backward(loss)`, `scaler.scale(loss).backward()`,
`self.manual_backward(loss)`. A plain `backward(...)` call is a function of the
module (a turtle's), and a `.backward` on `self` or `super()` is the class's own
method: neither is a backward pass.

The gate (`accumlint.source.gate`, raw text and Python's `ast`) derives its text
scan and its tree test from `BACKWARD`; the loop model (`accumlint.model.roles`,
LibCST's tree) derives its call test and the backward's flavor from it too, so a
form added here is seen by both. Both read the module attribute at call time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Mapping, Optional


@dataclass(frozen=True)
class BackwardForms:
    """The method calls that run a backward pass, and who runs each."""

    # method names: `receiver.<method>(...)` may be a backward pass
    methods: frozenset[str]
    # receivers, as dotted names (`model.names.dotted`: `super(Cls, self)` is "super()"),
    # whose backward method is the class's own: `self.backward(x)`; `self(batch).backward()`
    # (a Lightning module's forward) is a tensor's backward
    own_method_receivers: frozenset[str]
    # methods that are a backward pass whatever their receiver, with who runs them
    # (`self.manual_backward(loss)` is Lightning's)
    method_flavors: Mapping[str, str] = field(default_factory=dict)
    # the module a receiver names, by its qualified name's last part -> who runs the
    # backward (`torch.autograd.backward(tensors)`)
    module_flavors: Mapping[str, str] = field(default_factory=dict)
    # the role of a receiver (`model.roles.Roles.kind_of`) -> who runs its backward(loss)
    receiver_flavors: Mapping[str, str] = field(default_factory=dict)

    def is_backward(self, method: str, receiver: Optional[str]) -> bool:
        """Whether `receiver.method(...)` (receiver as a dotted name, None when it has none)
        is a backward call rather than a class's own method or something else."""
        if method not in self.methods:
            return False
        return method in self.method_flavors or receiver not in self.own_method_receivers

    @cached_property
    def search_words(self) -> tuple[str, ...]:
        """The fewest words one of which every method name holds: a text without any of
        them calls no backward (`backward` for `backward` and `manual_backward`)."""
        return tuple(sorted(m for m in self.methods if not any(o != m and o in m for o in self.methods)))

    @cached_property
    def own_receiver_before(self) -> "re.Pattern[str]":
        """A pattern that matches, at the end of a line's text up to a method name, an own
        receiver and its dot (`self.`, `super().`, `super(Cls, self).`)."""
        forms = []
        for receiver in sorted(self.own_method_receivers):
            if receiver.endswith("()"):
                forms.append(rf"\b{re.escape(receiver[:-2])}[ \t]*\([^()]*\)")
            else:
                forms.append(rf"(?<![\w.]){re.escape(receiver)}")
        return re.compile(rf"(?:{'|'.join(forms)})[ \t]*\.[ \t]*$")


BACKWARD = BackwardForms(
    methods=frozenset({"backward", "manual_backward"}),
    own_method_receivers=frozenset({"self", "super()"}),
    method_flavors=MappingProxyType({"manual_backward": "lightning"}),
    module_flavors=MappingProxyType({"autograd": "autograd"}),
    receiver_flavors=MappingProxyType({"accelerator": "accelerate", "fabric": "fabric", "engine": "deepspeed"}),
)
