"""The extractive brief, by job: its vocabulary (`labels`), reading an earlier brief (`read`),
facts to candidate items (`sections`), the budgeted filler (`fill`) and anchored merging
(`merge`). `precis.summarize.extractive` holds the entry points."""
