from trajlens.cli._app import run

run()
