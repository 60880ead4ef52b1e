"""Above the runtime: what an operator reads about jobs (lag, the overview) and the status page that shows it."""
