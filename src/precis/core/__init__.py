"""The pure core: messages, token counts, planning and validity — data in, data out, no I/O."""
