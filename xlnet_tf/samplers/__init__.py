"""keras-hub's random samplers with a draw that is the same with and without XLA (`seeded_sampler`)."""
