"""rl package of stockr1: Stock-R1 rewards (`rl.rewards`), u-GRPO as pure functions (`rl.grpo`), the
GRPO engine on Lightning Fabric (`rl.trainer`), run metrics and collapse warnings (`rl.logging`) and
`stockr1 grpo` (`rl.cli`; the library is `rl.setup`, with `run_grpo` for the pipeline and the ablation benchmark). Sibling methods
live in `rl.methods`. See docs/rl.md."""
