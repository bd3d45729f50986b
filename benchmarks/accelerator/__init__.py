"""The accelerator family: ``command`` (`stockr1 bench accelerator`, real training paths on one device),
``cost_model`` (parameters, FLOPs and memory of the Qwen3 + LoRA recipes), ``readme`` (`stockr1 bench cost_model`,
results/accelerator/README.md) and ``smoke`` (the cost model against the 4B SFT smoke)."""
