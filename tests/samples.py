"""Small source texts several test modules write into temporary trees."""

import textwrap

# A training loop the rules report on (GA201, with a safe fix), so that
# "still checked" and "fixed" are visible in a run.
UNSCALED_LOOP = textwrap.dedent(
    """\
    import torch

    def train(model, loader, optimizer, criterion, accum_steps=4):
        optimizer.zero_grad()
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            loss.backward()
            if (i + 1) % accum_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
    """
)
