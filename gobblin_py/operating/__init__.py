"""Above the runtime: what an operator reads about jobs (each dataset's lag, the overview) and the status page that shows it."""
