from rewards.app.cli import app

app()
