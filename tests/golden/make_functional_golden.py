"""Writes tests/golden/functional.safetensors, which tests/test_functional.cpp checks ember's
autograd::vjp, jvp, hvp, jacobian and hessian against: torch.autograd.functional's answers, in
float64, for three small functions that both libraries can write with the same ops. The file
is committed; the test needs no PyTorch. Run once, from anywhere, after changing what is
generated:

    /usr/bin/python3 tests/golden/make_functional_golden.py
"""
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.autograd import functional

from make_golden import save_safetensors

HERE = Path(__file__).resolve().parent


# The functions, written op for op as tests/test_functional.cpp writes them in ember.
def products(x, w):
    """[3, 4] and [4, 2] to [3, 2]: a product, tanh, and a gate read from a slice of x."""
    return torch.tanh(x @ w) * torch.sigmoid(x[:, 0:2])


def scalar_mix(x, a):
    """[5] and [5, 5] to a scalar: logsumexp of a product, plus sin(x) x^2 summed."""
    return torch.logsumexp(a @ x, dim=0) + (torch.sin(x) * x * x).sum()


def normalised(x, w, b):
    """[2, 3], [3], [3] to a scalar: gelu of a layer norm, squared and summed, plus a softmax term."""
    y = F.gelu(F.layer_norm(x, [3], w, b))
    return (y * y).sum() + (F.softmax(x, dim=-1) * x).sum()


def main():
    torch.manual_seed(0)
    g = lambda *shape: torch.randn(*shape, dtype=torch.float64)
    tensors = {}

    x, w = g(3, 4), g(4, 2)
    v, tx, tw = g(3, 2), g(3, 4), g(4, 2)
    tensors.update({"products.x": x, "products.w": w, "products.v": v, "products.tx": tx, "products.tw": tw})
    out, (vjp_x, vjp_w) = functional.vjp(products, (x, w), v)
    _, jvp = functional.jvp(products, (x, w), (tx, tw))
    jac_x, jac_w = functional.jacobian(products, (x, w))
    tensors.update({"products.out": out, "products.vjp_x": vjp_x, "products.vjp_w": vjp_w, "products.jvp": jvp,
                    "products.jacobian_x": jac_x, "products.jacobian_w": jac_w})

    x, a, vx, va = g(5), g(5, 5) * 0.5, g(5), g(5, 5)
    tensors.update({"scalar_mix.x": x, "scalar_mix.a": a, "scalar_mix.vx": vx, "scalar_mix.va": va})
    out, (hvp_x, hvp_a) = functional.hvp(scalar_mix, (x, a), (vx, va))
    hessian = functional.hessian(scalar_mix, (x, a))
    out_vjp, (grad_x, grad_a) = functional.vjp(scalar_mix, (x, a))
    tensors.update({"scalar_mix.out": out, "scalar_mix.hvp_x": hvp_x, "scalar_mix.hvp_a": hvp_a,
                    "scalar_mix.grad_x": grad_x, "scalar_mix.grad_a": grad_a})
    for i, row in enumerate(hessian):
        for j, block in enumerate(row):
            tensors[f"scalar_mix.hessian_{i}{j}"] = block

    x, w, b, vx = g(2, 3), g(3), g(3), g(2, 3)
    tensors.update({"normalised.x": x, "normalised.w": w, "normalised.b": b, "normalised.vx": vx})
    out, hvp_x = functional.hvp(lambda x: normalised(x, w, b), x, vx)
    hessian = functional.hessian(lambda x: normalised(x, w, b), x)
    tensors.update({"normalised.out": out, "normalised.hvp_x": hvp_x, "normalised.hessian": hessian})

    save_safetensors(HERE / "functional.safetensors", {k: t.contiguous() for k, t in tensors.items()},
                     {"generator": "torch.autograd.functional " + torch.__version__})


if __name__ == "__main__":
    main()
