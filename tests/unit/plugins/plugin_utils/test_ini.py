from __future__ import annotations

import configparser

import pytest

from ansible_collections.deployopen.k8s_openstack.plugins.plugin_utils._ini import ini_set_options

EXISTING = """# managed
[Global]
auth-url = http://old/v3
application-credential-id = OLD
application-credential-secret = OLDSECRET

[LoadBalancer]
floating-network-id = net-1
"""


@pytest.mark.parametrize("text,options,expect_global,expect_lb", [
    (EXISTING, {"application-credential-id": "NEW", "application-credential-secret": "NEWSECRET"},
     {"auth-url": "http://old/v3", "application-credential-id": "NEW", "application-credential-secret": "NEWSECRET"},
     {"floating-network-id": "net-1"}),
    (EXISTING, {"region": "RegionOne"},
     {"auth-url": "http://old/v3", "application-credential-id": "OLD", "application-credential-secret": "OLDSECRET",
      "region": "RegionOne"}, {"floating-network-id": "net-1"}),
    (EXISTING, {"auth-url": None}, {"application-credential-id": "OLD", "application-credential-secret": "OLDSECRET"},
     {"floating-network-id": "net-1"}),
    ("", {"region": "R", "tls-insecure": True}, {"region": "R", "tls-insecure": "true"}, None),
    (None, {"region": "R", "ca-file": None}, {"region": "R"}, None),
])
def test_ini_set_options(text: str | None, options: dict, expect_global: dict, expect_lb: dict | None) -> None:
    out = ini_set_options(text, "Global", options)
    parser = configparser.ConfigParser()
    parser.read_string(out)
    assert dict(parser["Global"]) == expect_global
    if expect_lb is None:
        assert parser.sections() == ["Global"]
    else:
        assert dict(parser["LoadBalancer"]) == expect_lb
    assert out.endswith("\n")
    assert ini_set_options(out, "Global", options) == out  # idempotent


def test_comments_and_order_kept_and_duplicates_dropped() -> None:
    text = "# top\n[Global]\n# keep me\nregion = A\nregion = B\n"
    assert ini_set_options(text, "Global", {"region": "C"}) == "# top\n[Global]\n# keep me\nregion = C\n"


def test_refuses_line_breaks() -> None:
    with pytest.raises(ValueError, match="line break"):
        ini_set_options("", "Global", {"region": "a\nb"})
