"""A request to its result: the scorer, its assembly from settings, and the request reader."""
