"""codeopt-records: make a slow record-processing function fast, exactly (harness, child entry, reference, scripted rewrites, agent profile)."""
