"""A #[tpu_kernel] kernel used as a torch op inside an nn.Module, eagerly and under
torch.compile(fullgraph=True), with autograd through the kernel's registered backward.

    python python/examples/custom_op.py
"""

import torch

import tessera.torch  # noqa: F401  registers the shipped kernels as torch.ops.tessera.*


class Classifier(torch.nn.Module):
    def __init__(self, features=256, classes=128):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(features))
        self.b = torch.nn.Parameter(torch.zeros(features))
        self.head = torch.nn.Linear(features, classes)

    def forward(self, x):
        h = torch.ops.tessera.layer_norm(x, self.w, self.b)  # the Rust kernel
        h = torch.ops.tessera.silu(h)  # another one
        return torch.ops.tessera.softmax(self.head(h))  # and a third, with autograd


def main():
    torch.manual_seed(0)
    model = Classifier()
    x = torch.randn(32, 256)
    eager = model(x)
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")(x)
    print("eager vs compiled, max |diff|:", (eager - compiled).abs().max().item())
    reference = torch.softmax(model.head(torch.nn.functional.silu(
        torch.nn.functional.layer_norm(x, (256,), model.w, model.b))), -1)
    print("kernel ops vs torch's own math, max |diff|:", (eager - reference).abs().max().item())
    eager.log().mean().backward()
    print("gradient of the head's weight, norm:", model.head.weight.grad.norm().item())


if __name__ == "__main__":
    main()
