import secrets

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = (
        "Create (or reset the password of) a local staff account and print its login. "
        "For a laptop set-up; in production create accounts with createsuperuser."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="researcher")

    def handle(self, *args, username: str, **options):
        # get_or_create does not validate: an empty or malformed name would become an account.
        field = get_user_model()._meta.get_field(get_user_model().USERNAME_FIELD)
        try:
            field.clean(username, None)
        except ValidationError as exc:
            raise CommandError(f"--username {username!r}: {' '.join(exc.messages)}") from None
        user, created = get_user_model().objects.get_or_create(username=username)
        password = secrets.token_urlsafe(12)
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        self.stdout.write(
            self.style.SUCCESS(f"Staff login: {username} / {password}  ({'created' if created else 'password reset'})")
        )
