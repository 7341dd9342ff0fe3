from lokal.errors import ConfigError, MessageError, ParseError  # noqa: F401
