"""The routes of ``lokal serve``, one module an API: ``models`` (health and the model list),
``chat`` (OpenAI's chat completions). Each reads the server's ``ServeState`` from
``request.app.state.lokal`` and runs its replies through ``lokal.serve.turn``."""
