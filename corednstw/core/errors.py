"""The errors a configuration can have, in their own module so that the
grammar (corefile), the directive registry (directives) and every plugin
can raise them without importing each other."""


class CorefileError(Exception):
    """A Corefile that cannot be used, located at ``file:line``."""

    def __init__(self, file, line, message, directive=None,
                 kind="Error during parsing"):
        super().__init__(file, line, message)
        self.file, self.line, self.message = file, line, message
        self.directive = directive
        self.kind = kind

    def __str__(self):
        return "%s:%d - %s: %s" % (self.file, self.line, self.kind,
                                   self.message)


class PluginError(CorefileError):
    """An installed plugin package that cannot be used (two packages with
    one directive, a place in the chain that does not exist).  It is no
    line of the Corefile: the message names the package instead."""

    def __init__(self, package, message):
        super().__init__(package, 0, message, kind="Plugin error")
        self.package = package

    def __str__(self):
        return "%s: %s" % (self.kind, self.message)
