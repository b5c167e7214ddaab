"""The embedded base model, built offline in minutes (`cptlab build-base`).

settings.py      the config's `base` section: the recipe, with its defaults
tokenizer.py     a byte-level BPE tokenizer trained on the warm-up text, ChatML template
architecture.py  a small Qwen2 model initialised from the config
warmup.py        the warm-up examples (plain and in SDPO's teacher form) and the SFT loop
build.py         build_base(): tokenizer, model, warm-up, the measurements and their bounds
rehearsal.py     the rehearsal's base: a tiny untrained Qwen3 (`build-rehearsal-base`)
cli.py           the `build-base` and `build-rehearsal-base` subcommands
"""
