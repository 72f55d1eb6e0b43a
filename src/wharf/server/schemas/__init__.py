"""Wire schemas, split by role: ``actions`` (request bodies), ``responses``, ``filters`` (query
parameters). Store records and create/update models are reused where the wire shape is the same;
wire models exist where they differ (bounded numbers and instants, positional store arguments,
secrets shown once)."""
