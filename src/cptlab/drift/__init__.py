"""Why forgetting happens: drift of parameters and responses, distances between data sets, and
forensics of collapsed outputs.

settings.py          the config's `drift` section (DriftSettings) and the jobs' thread caps
weights.py           streaming safetensors reader (single file or sharded with an index)
parameters.py        per-matrix NSS, principal angles, principal-mask overlap/update share,
                     relative Frobenius change; `parameter_drift` over two checkpoints
responses.py         per-prompt embedding cosine and ROUGE-L F1 between trained and base responses
embedders.py         the offline all-MiniLM-L6-v2 embedder and a hashing fallback
distances.py         unbiased RBF MMD between prompt sets, t-SNE map, gain/forgetting vs MMD trend
collapse.py          repeated n-grams, repetition, format violations, lengths, degenerate
                     outputs, artifact frequency over training steps
text.py              the tokenizer and n-gram helpers all lexical measures share
tables.py            input readers and atomic table writers
base_responses.py    the workflow's `drift-base` job: the base's response embeddings, once
chain.py             the workflow's `drift-chain` job: every analysis of one chain's stages
dataset_distance.py  the workflow's `dataset-distance` job
plots.py             the workflow's `drift-figures` job
cli.py               the subcommands
"""
