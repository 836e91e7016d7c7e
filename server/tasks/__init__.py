"""Built-in tasks, one folder each; the registry (registry.py) finds them and plugins."""
