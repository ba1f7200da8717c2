"""The console's security rules over plain HTTP, as an attacker's page or script would send
requests: the Host allow-list, the origin and CSRF token of every change, the login against
the cluster's own SASL users (each acting with its own ACLs, the lag sampler too), read-only
mode, and no open console beyond loopback."""
import re
import subprocess

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from consolehttp import Visitor
from consoletools import console_argv
from security_tools import SecureBroker, make_certificates
from waiting import wait_until

from minilog.connector.client import AdminClient as MinilogAdmin
from minilog.connector.client import NewTopic as MinilogTopic

pytestmark = pytest.mark.timeout(300)

PASSWORDS = {"admin": "admin-secret", "carol": "carol-secret"}  # carol: no ACL at all
SASL = ("-X", "security.protocol=SASL_PLAINTEXT")


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    """One broker, ACLs on (admin the super user), SCRAM users on SASL_PLAINTEXT (admin with
    SCRAM-SHA-256 only: the console finds the mechanism), and a topic `payments`."""
    scram = f"SCRAM-SHA-256=[name=admin,password={PASSWORDS['admin']}];" \
            f"SCRAM-SHA-512=[name=carol,password={PASSWORDS['carol']}]"
    b = SecureBroker(make_certificates(tmp_path_factory.mktemp("certs")), extra=[
        "-o", "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "-o", "super.users=User:admin", "-o", f"sasl.scram={scram}"]).start()
    admin_conf = {"bootstrap.servers": b.bootstrap_for("SASL_PLAINTEXT"),
                  "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
                  "sasl.username": "admin", "sasl.password": PASSWORDS["admin"]}
    admin = AdminClient(admin_conf)
    for f in admin.create_topics([NewTopic("payments", 1, 1)]).values():
        f.result(60)
    producer = Producer(admin_conf)
    producer.produce("payments", value=b'{"card": "4111-0000"}')
    assert producer.flush(60) == 0
    yield b
    b.cleanup()


@pytest.fixture
def login_console(acl_broker, start_console):
    """A console of the SASL cluster: users log in (no credentials of its own)."""
    return start_console(acl_broker.bootstrap_for("SASL_PLAINTEXT"), options=SASL)


def topic_exists(bootstrap, name):
    with MinilogAdmin({"bootstrap.servers": bootstrap}) as admin:
        return name in admin.list_topics(timeout=30)


# -- Host allow-list ----------------------------------------------------------------------------
def test_a_foreign_host_header_is_refused(broker, start_console):
    console = start_console(broker.bootstrap)
    visitor = Visitor(console.port)
    assert visitor.get("/topics").status == 200
    refused = visitor.get("/topics", Host="attacker.example")
    assert refused.status == 400 and "attacker.example" in refused.body
    assert visitor.get("/topics", Host=f"localhost:{console.port}").status == 200


def test_an_allowed_host_is_served(broker, start_console):
    console = start_console(broker.bootstrap, "--allow-host", "console.example")
    assert Visitor(console.port).get("/", Host="console.example:8080").status == 200


# -- CSRF and origin ----------------------------------------------------------------------------
def test_a_change_without_the_csrf_token_is_refused(broker, start_console):
    broker_admin = MinilogAdmin({"bootstrap.servers": broker.bootstrap})
    broker_admin.create_topics([MinilogTopic("kept-1", 1, 1)])
    console = start_console(broker.bootstrap)
    visitor = Visitor(console.port)
    visitor.get("/topics")  # has a session cookie, as a logged-in victim would
    change = {"action": "delete", "name": "kept-1", "confirmed": "yes"}
    refused = visitor.post("/change", change)
    assert refused.status == 403 and "CSRF" in refused.body
    assert visitor.post("/change", {**change, "csrf_token": "0" * 64}).status == 403
    stranger = Visitor(console.port)  # another browser's token is not this session's
    assert visitor.post("/change", {**change, "csrf_token": stranger.token()}).status == 403
    assert topic_exists(broker.bootstrap, "kept-1")
    done = visitor.post("/change", {**change, "csrf_token": visitor.token()})
    assert done.status == 303, done.body  # the console's own form works
    assert not topic_exists(broker.bootstrap, "kept-1")
    broker_admin.close()


def test_a_cross_origin_change_is_refused(broker, start_console):
    with MinilogAdmin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([MinilogTopic("kept-2", 1, 1)])
    console = start_console(broker.bootstrap)
    visitor = Visitor(console.port)
    change = {"action": "alter", "name": "kept-2", "config_key": "retention.ms",
              "config_value": "1", "confirmed": "yes", "csrf_token": visitor.token()}
    refused = visitor.post("/change", change, Origin="http://attacker.example")
    assert refused.status == 403 and "another site" in refused.body
    with MinilogAdmin({"bootstrap.servers": broker.bootstrap}) as admin:
        assert admin.describe_configs("topic", "kept-2")["retention.ms"].value != "1"
    same = visitor.post("/change", change, Origin=f"http://127.0.0.1:{console.port}")
    assert same.status == 303


def test_the_session_cookie_is_http_only_and_same_site_strict(broker, start_console):
    visitor = Visitor(start_console(broker.bootstrap).port)
    visitor.get("/")
    (cookie,) = visitor.set_cookies
    assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()


# -- read-only ----------------------------------------------------------------------------------
def test_a_read_only_console_refuses_changes(broker, start_console):
    with MinilogAdmin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([MinilogTopic("kept-3", 1, 1)])
    console = start_console(broker.bootstrap, "--read-only")
    visitor = Visitor(console.port)
    page = visitor.get("/topics/kept-3")
    assert page.status == 200 and 'action="/change"' not in page.body
    token = visitor.token("/login")  # the session's valid token: still refused
    refused = visitor.post("/change", {"action": "delete", "name": "kept-3", "confirmed": "yes",
                                       "csrf_token": token})
    assert refused.status == 403 and "read-only" in refused.body
    assert topic_exists(broker.bootstrap, "kept-3")


# -- login --------------------------------------------------------------------------------------
def test_without_a_login_every_page_sends_to_the_login_page(login_console):
    visitor = Visitor(login_console.port)
    for path in ("/", "/topics/payments/records?partition=0", "/groups/x"):
        sent = visitor.get(path)
        assert sent.status == 303 and sent.header("location").startswith("/login?next=%2F"), path
    assert visitor.get("/login").status == 200


def test_a_wrong_password_is_refused(login_console):
    visitor = Visitor(login_console.port)
    refused = visitor.log_in("admin", "not-the-password")
    assert refused.status == 401 and "wrong username or password" in refused.body
    assert visitor.get("/topics/payments/records?partition=0").status == 303
    assert visitor.log_in("nobody", "admin-secret").status == 401


def test_a_logged_in_user_acts_with_their_own_acls(login_console):
    admin = Visitor(login_console.port)
    assert admin.log_in("admin", "admin-secret").status == 303
    records = admin.get("/topics/payments/records?partition=0&offset=0")
    assert records.status == 200 and "4111-0000" in records.body
    carol = Visitor(login_console.port)
    assert carol.log_in("carol", "carol-secret").status == 303
    assert "carol" in carol.get("/").body
    for path in ("/topics/payments", "/topics/payments/records?partition=0&offset=0"):
        refused = carol.get(path)
        assert refused.status == 403, (path, refused.status)
        assert "TOPIC_AUTHORIZATION_FAILED" in refused.body and "4111" not in refused.body
    assert "payments" not in carol.get("/topics").body  # Metadata hides it from carol
    change = {"action": "create", "name": "carols", "partitions": "1", "confirmed": "yes",
              "csrf_token": carol.token()}
    assert carol.post("/change", change).status == 403
    assert admin.post("/logout", {"csrf_token": admin.token()}).status == 303
    assert admin.get("/topics").status == 303


def test_a_session_cookie_fixed_before_login_does_not_carry_it(login_console):
    victim = Visitor(login_console.port)
    victim.get("/login")
    planted = dict(victim.cookies)
    assert victim.log_in("admin", "admin-secret").status == 303
    attacker = Visitor(login_console.port)
    attacker.cookies = planted
    assert attacker.get("/topics").status == 303


# -- lag history with logins ---------------------------------------------------------------------
SAMPLES = re.compile(r"(\d+) samples</text>")


def _committed_group(broker, group):
    """`group` with offset 0 committed on payments (one record behind), as admin."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_for("SASL_PLAINTEXT"),
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
                         "sasl.username": "admin", "sasl.password": PASSWORDS["admin"],
                         "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition("payments", 0, 0)], asynchronous=False)
    finally:
        consumer.close()


def test_lag_is_sampled_as_each_logged_in_user_between_page_views(acl_broker, start_console):
    """With logins the background sampler acts as each live session's user: admin's group page
    shows more samples than it was viewed (the page records one per view); carol, with no
    ACL, is refused the page and gets no history of the group."""
    _committed_group(acl_broker, "payments-auditors")
    console = start_console(acl_broker.bootstrap_for("SASL_PLAINTEXT"), "--lag-interval", "0.2",
                            options=SASL)
    admin = Visitor(console.port)
    assert admin.log_in("admin", "admin-secret").status == 303
    views = []

    def sampled_between_views():
        page = admin.get("/groups/payments-auditors")
        assert page.status == 200, page.body
        views.append(int(SAMPLES.search(page.body).group(1)))
        return views[-1] - len(views) >= 2
    wait_until(sampled_between_views, 30, "samples taken between admin's page views",
               interval=0.5)
    carol = Visitor(console.port)
    assert carol.log_in("carol", "carol-secret").status == 303
    refused = carol.get("/groups/payments-auditors")
    assert refused.status == 403 and "samples" not in refused.body


# -- where it listens ---------------------------------------------------------------------------
@pytest.mark.parametrize("options", [(), (*SASL, "-X", "sasl.mechanism=PLAIN")])
def test_an_open_console_beyond_loopback_is_refused(broker, options):
    args = ("--listen", "0.0.0.0:0") if not options else ("--listen", "0.0.0.0:0", "--no-login")
    run = subprocess.run(console_argv(broker.bootstrap, *args, options=options),
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1 and "refusing to listen on 0.0.0.0" in run.stderr
