"""Trading-R1 (Xiao et al., 2025) on the shared stack: labels, prompt, rewards, curriculum."""
