"""`precis eval`: replay conversations per strategy and measure what survives."""
