"""curaflow's side of Temporal: connecting (profile, converter), preparing a namespace, upgrades."""
