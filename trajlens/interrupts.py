"""Clean-up that a second Ctrl-C does not cut short.

Polars and DuckDB notice Ctrl-C themselves and raise ``KeyboardInterrupt`` (or end their query)
while Python's own signal flag is still set, so one Ctrl-C raises twice: the second time at
the first function call of the clean-up the first one started (removing a partial file, a
staging folder), which it would cut short, leaving the partial output behind. Python raises a
pending interrupt when a function starts, so no helper function can guard its own start: each
clean-up is written, where the interrupt is handled, as::

    while True:  # a second Ctrl-C: trajlens.interrupts
        try:
            remove(partial)
            break
        except KeyboardInterrupt:
            continue

and must be safe to repeat (removing files and folders is). The interrupt that started the
clean-up goes on once it is done.
"""
