"""Small source texts several test modules write into temporary trees."""

import textwrap

# The body of a training loop the rules report on (GA201, with a safe fix), so
# that "still checked" and "fixed" are visible in a run.
_UNSCALED_BODY = textwrap.dedent(
    """\
    optimizer.zero_grad()
    for i, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        loss.backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
    """
)

# That loop in a function.
UNSCALED_LOOP = "import torch\n\ndef train(model, loader, optimizer, criterion, accum_steps=4):\n" + textwrap.indent(
    _UNSCALED_BODY, "    "
)

# That loop at module level, every name it reads bound before it (the criterion built
# here: one imported from an unknown module has an unknown reduction).
UNSCALED_LOOP_AT_MODULE_LEVEL = (
    "import torch\n\nfrom project import loader, model, optimizer\n\n"
    "criterion = torch.nn.CrossEntropyLoss()\naccum_steps = 4\n" + _UNSCALED_BODY
)
