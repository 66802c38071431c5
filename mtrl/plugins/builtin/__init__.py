"""Built-in plugins; they register through the same hooks as third-party ones."""
