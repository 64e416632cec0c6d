"""Kernel ABI constants shared by the code generator and the compiled core.

They mirror ``csrc/nh_abi.h``; a test checks that the compiled core agrees.
"""

ABI_VERSION = 1
INFO_LEN = 6
#: Bits of the ``flags`` entry of a kernel library's info array.
HAS = {"rhs": 1, "jacobian": 2, "divergence": 4, "observables": 8, "dHdq": 16, "dHdp": 32}
#: Exported C symbol of each kernel family.
SYMBOL = {
    "rhs": "nh_rhs",
    "jacobian": "nh_jacobian",
    "divergence": "nh_divergence",
    "observables": "nh_observables",
    "dHdq": "nh_dHdq",
    "dHdp": "nh_dHdp",
}
