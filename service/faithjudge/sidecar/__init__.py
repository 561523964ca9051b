"""The VLM sidecar: generates baseline and modified CoTs for a vision-language model.

Submodules: ``images`` (safe loading and preprocessing), ``perturb`` (the input modifications,
pure numpy/PIL) and the VLM side (items, backends, parsing, generation, app, CLI). Nothing heavy
is imported here, so ``import faithjudge.sidecar`` works without torch.
"""
