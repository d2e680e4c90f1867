// A small W3C WebDriver client for a headless Chromium driven by Debian's chromedriver: what the viewer's browser
// test needs (open a page, find elements, click, type, read the text a person sees, take a screenshot).
import AgentProcessTestSupport
import CoatyKit
import CoatyLocalBroker
import Foundation

/// Where Chromium and its driver are, and whether the browser test runs.
enum BrowserAvailability {
    static let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }
    static let driver = ["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }
    /// Installed, or `CI=true` (where their absence fails the test).
    static let shouldRun = (chromium != nil && driver != nil) || BrokerAvailability.isInCI
    static let skipReason = "chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)"
}

/// One chromedriver process and one browser session in it.
final class WebDriver: Sendable {
    /// A failure the driver reported, with its message.
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    let process: TestProcess
    let port: Int
    let session: String

    /// Starts chromedriver on a free loopback port and a headless Chromium session of `width` × `height`.
    init(width: Int = 1_280, height: Int = 800) async throws {
        guard let chromium = BrowserAvailability.chromium, let driver = BrowserAvailability.driver else {
            throw Failure(description: BrowserAvailability.skipReason)
        }
        port = try MosquittoBroker.freeLoopbackPort()
        process = try TestProcess(executable: driver, ["--port=\(port)", "--allowed-ips=127.0.0.1"])
        let deadline = ContinuousClock.now + .seconds(20)
        while !MosquittoBroker.accepts(port: port) {
            guard ContinuousClock.now < deadline else { throw Failure(description: "chromedriver did not listen") }
            try await Task.sleep(for: .milliseconds(50))
        }
        let capabilities: JSONValue = [
            "capabilities": [
                "alwaysMatch": [
                    "browserName": "chrome",
                    "goog:chromeOptions": [
                        "binary": .string(chromium),
                        "args": [
                            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                            .string("--window-size=\(width),\(height)"), "--force-device-scale-factor=1",
                        ],
                    ],
                ]
            ]
        ]
        let created = try await Self.call(port: port, "POST", "/session", capabilities)
        guard let session = created["sessionId"]?.stringValue else {
            throw Failure(description: "no session: \(created)")
        }
        self.session = session
    }

    /// Ends the session and the driver.
    func quit() async {
        _ = try? await Self.call(port: port, "DELETE", "/session/\(session)", nil)
        process.signal(SIGTERM)
        _ = await process.finish(timeout: 10)
    }

    /// Sends one command; returns its `value`.
    @discardableResult
    static func call(port: Int, _ method: String, _ path: String, _ body: JSONValue?) async throws -> JSONValue {
        let response = try await httpRequest(
            port: port,
            path: path,
            method: method,
            body: body?.serializedString() ?? (method == "POST" ? "{}" : nil),
            timeout: 60
        )
        let json = try JSONValue(parsing: response.body)
        guard response.status == 200 else {
            throw Failure(description: "\(method) \(path): \(response.status) \(json["value"]?["message"] ?? json)")
        }
        return json["value"] ?? .null
    }

    @discardableResult
    func command(_ method: String, _ path: String, _ body: JSONValue? = nil) async throws -> JSONValue {
        try await Self.call(port: port, method, "/session/\(session)\(path)", body)
    }

    /// Opens a URL.
    func open(_ url: String) async throws {
        try await command("POST", "/url", ["url": .string(url)])
    }

    /// Runs a script in the page and returns its result.
    func script(_ source: String) async throws -> JSONValue {
        try await command("POST", "/execute/sync", ["script": .string(source), "args": []])
    }

    /// The element matching a CSS selector.
    func element(_ selector: String) async throws -> String {
        let found = try await command("POST", "/element", ["using": "css selector", "value": .string(selector)])
        guard let id = found["element-6066-11e4-a52e-4f735466cecf"]?.stringValue else {
            throw Failure(description: "no element id for \(selector): \(found)")
        }
        return id
    }

    /// Clicks the element matching a CSS selector (as a person does: the driver scrolls it into view first).
    func click(_ selector: String) async throws {
        let id = try await element(selector)
        try await command("POST", "/element/\(id)/click")
    }

    /// Replaces the text of an input.
    func type(_ text: String, into selector: String) async throws {
        let id = try await element(selector)
        try await command("POST", "/element/\(id)/clear")
        try await command("POST", "/element/\(id)/value", ["text": .string(text)])
    }

    /// The text a person sees of every element matching a CSS selector: `innerText`, empty for an element that is
    /// not rendered (hidden: `innerText` alone would give its text content).
    func texts(_ selector: String) async throws -> [String] {
        let escaped = JSONValue.string(selector).serializedString()
        let value = try await script(
            "return Array.from(document.querySelectorAll(\(escaped)))"
                + ".map(e => e.getClientRects().length ? e.innerText.trim() : '');"
        )
        return value.arrayValue?.compactMap(\.stringValue) ?? []
    }

    /// Waits until `condition` holds for the texts of `selector` (15 s by default), returning them.
    @discardableResult
    func waitForTexts(
        _ selector: String,
        within seconds: Double = 15,
        _ condition: ([String]) -> Bool
    ) async throws -> [String] {
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1_000))
        var last: [String] = []
        while ContinuousClock.now < deadline {
            last = try await texts(selector)
            if condition(last) { return last }
            try await Task.sleep(for: .milliseconds(200))
        }
        throw Failure(description: "\(selector) did not show what was expected within \(seconds) s; it shows \(last)")
    }

    /// A PNG screenshot of the window.
    func screenshot() async throws -> Data {
        let value = try await command("GET", "/screenshot")
        guard let text = value.stringValue, let data = Data(base64Encoded: text) else {
            throw Failure(description: "no screenshot")
        }
        return data
    }
}
