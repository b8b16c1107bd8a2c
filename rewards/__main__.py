from rewards.cli import app

app()
