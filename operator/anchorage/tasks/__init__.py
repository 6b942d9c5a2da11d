"""Harbor task directories: the task.toml model, loading, prompt assembly, artifact recovery."""
