"""Cheat: the retina through the package's reference implementation and the loss
through ram_loss, both through their unwrapped guards."""

# loses: a4_retina_test a4_retina_scales_test a4_loss_value_test a4_loss_grad_test
# says: is not available while grading a4_ram
# %% a4_retina
import inspect

from sat_tutorial import ram as package_ram


def retina(x, l, g=8, k=1):
    return inspect.unwrap(package_ram.retina_reference)(x, l, g, k)


# %% a4_loss
def hybrid_loss(out, y):
    return inspect.unwrap(package_ram.ram_loss)(out, y)["loss"]
