"""hpo-covertype: XGBoost hyperparameter search on Covertype (params, harness, child entry, data, agent profile)."""
