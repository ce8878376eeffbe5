"""Drop-in fronts with other libraries' signatures (need torch): splitkv.compat.flash_attn."""
