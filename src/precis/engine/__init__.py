"""The compaction engine: settings, triggers, hooks, truncation, views, the compaction itself."""
