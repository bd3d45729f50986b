"""The QA benchmark: ``command`` (`stockr1 bench qa`, Table 1), ``baselines`` (`stockr1 bench qa_baselines`, the
question-only floor), ``answers`` (answer spread per template), ``targets`` (the policy targets read off intervals)
and ``reuse`` (reusing identical greedy rollouts between runs)."""
