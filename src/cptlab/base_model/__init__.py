"""The embedded base model, built offline in minutes (`cptlab build-base`), or copied from the
shipped build of the same recipe (models/embedded-base).

settings.py      the config's `base` section: the recipe, with its defaults
tokenizer.py     a byte-level BPE tokenizer trained on the warm-up text, ChatML template
architecture.py  a small Qwen2 model initialised from the config
warmup.py        the SFT loop of the warm-up
weights.py       the warm-up examples (plain and in SDPO's teacher form) and train_weights()
measure.py       the measurements of a base and their bounds
shipped.py       the recipe a build is made from, and copying a shipped base of that recipe
build.py         build_base(): the weights (built or copied), their measurements, the manifest
rehearsal.py     the rehearsal's base: a tiny untrained Qwen3 (`build-rehearsal-base`)
cli.py           the `build-base` and `build-rehearsal-base` subcommands
"""
