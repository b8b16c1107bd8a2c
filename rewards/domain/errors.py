"""The base of domain errors: each rule broken carries the HTTP status the API answers with."""


class DomainError(Exception):
    status = 400
