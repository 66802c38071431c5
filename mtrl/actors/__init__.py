"""Actors: step batch envs with the current policy and write fixed-length unrolls."""
