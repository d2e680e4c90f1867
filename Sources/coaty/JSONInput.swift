import CoatyKit
import Foundation

/// Reading the JSON arguments of commands; every failure is a ``CLIError`` (exit 1).
enum JSONInput {
    /// The text of `argument`, or all of stdin when the argument is absent or `-`.
    static func text(_ argument: String?) -> String {
        if let argument, argument != "-" { return argument }
        return String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
    }

    /// The bytes of `argument`, or all of stdin when the argument is absent or `-`.
    static func bytes(_ argument: String?) -> [UInt8] {
        if let argument, argument != "-" { return Array(argument.utf8) }
        return Array(FileHandle.standardInput.readDataToEndOfFile())
    }

    /// Parses JSON text, naming `what` in the error.
    static func parse(_ text: String, what: String) throws -> JSONValue {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else { throw CLIError("No JSON given for \(what); pass it as an argument or on stdin.") }
        do {
            return try JSONValue(parsing: trimmed)
        } catch {
            throw CLIError("Invalid JSON in \(what): \(error).")
        }
    }

    /// Parses a JSON object, naming `what` in the error.
    static func parseObject(_ text: String, what: String) throws -> JSONObject {
        guard case .object(let object) = try parse(text, what: what) else {
            throw CLIError("\(what) must be a JSON object.")
        }
        return object
    }

    /// One Coaty object, or each of an array, from `argument` (or stdin).
    static func objects(_ argument: String?, registry: CoatyObjectRegistry = CoatyObjectRegistry()) throws
        -> (objects: [AnyCoatyObject], isArray: Bool)
    {
        let value = try parse(text(argument), what: "the object")
        switch value {
        case .array(let elements):
            var result: [AnyCoatyObject] = []
            for (index, element) in elements.enumerated() {
                result.append(try object(element, what: "object [\(index)]", registry: registry))
            }
            return (result, true)
        default:
            return ([try object(value, what: "the object", registry: registry)], false)
        }
    }

    /// A Coaty object from JSON; a missing `objectId` gets a fresh UUID and a missing `coreType`
    /// is taken from a `coaty.<CoreType>` object type (else `CoatyObject`).
    static func object(_ value: JSONValue, what: String, registry: CoatyObjectRegistry) throws -> AnyCoatyObject {
        guard case .object(var json) = value else {
            throw CLIError("\(what) must be a JSON object with objectType, coreType, objectId and name.")
        }
        if json["objectId"] == nil { json["objectId"] = .string(CoatyUUID().uuidString) }
        if json["coreType"] == nil, let objectType = json["objectType"]?.stringValue {
            json["coreType"] = .string((CoreType(objectType: objectType) ?? .coatyObject).rawValue)
        }
        do {
            return try registry.decode(json)
        } catch {
            throw CLIError("\(what) is not a valid Coaty object: \(error)")
        }
    }

    /// The comma-separated items of `list`, trimmed, empty ones left out.
    static func list(_ list: String) -> [String] {
        list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// Core type names (e.g. `Task,Identity`); an unknown name is a ``CLIError``.
    static func coreTypes(_ list: String) throws -> [CoreType] {
        try self.list(list).map(coreType)
    }

    /// One core type name; an unknown name is a ``CLIError``.
    static func coreType(_ name: String) throws -> CoreType {
        if let type = CoreType(rawValue: name) ?? CoreType(objectType: name) { return type }
        let known = CoreType.allCases.map(\.rawValue).joined(separator: ", ")
        throw CLIError("Unknown core type '\(name)'; use one of: \(known).")
    }

    /// Decodes a `Decodable` filter value from JSON text.
    static func decode<T: Decodable>(_ type: T.Type, _ text: String, what: String) throws -> T {
        let value = try parse(text, what: what)
        do {
            return try JSONValueDecoder().decode(T.self, from: value)
        } catch {
            throw CLIError("Invalid \(what): \(error)")
        }
    }
}

/// The JSON lines commands print: `{"event","topic","sourceId","correlationId"?,"data"}`.
enum EventLine {
    /// The line of a Coaty event received on `topic` with payload `data`.
    static func make(_ event: String, topic: CoatyTopic, data: JSONObject) -> String {
        var line = header(event, topic: topic)
        JSONSerializer.writeObject(data, to: &line)
        line.append(UInt8(ascii: "}"))
        return String(decoding: line, as: UTF8.self)
    }

    /// The line of a request a `coaty respond` command answered: as ``make(_:topic:data:)``,
    /// plus `answered`, the responses published (`[{"event":…,"data":{…}}]`).
    static func make(_ event: String, topic: CoatyTopic, data: JSONObject, answered: [JSONValue]) -> String {
        var line = header(event, topic: topic)
        JSONSerializer.writeObject(data, to: &line)
        line.append(contentsOf: #","answered":"#.utf8)
        JSONSerializer.write(.array(answered), to: &line)
        line.append(UInt8(ascii: "}"))
        return String(decoding: line, as: UTF8.self)
    }

    /// The line of an Advertise. A received object's text goes into the line as it arrived — no
    /// parse into a tree, no second serialization (a third of `coaty observe`'s CPU per event) —
    /// unless it spans several lines; then, and for an object built here, as ``make(_:topic:data:)``.
    static func advertise(topic: CoatyTopic, object: AnyCoatyObject, privateData: JSONObject?) -> String {
        var line = header("Advertise", topic: topic)
        line.append(contentsOf: #"{"object":"#.utf8)
        let textStart = line.count
        guard object.appendReceivedText(to: &line),
            !line[textStart...].contains(where: { $0 == UInt8(ascii: "\n") || $0 == UInt8(ascii: "\r") })
        else {
            return make(
                "Advertise",
                topic: topic,
                data: AdvertiseEventData(object: object, privateData: privateData).json
            )
        }
        if let privateData {
            line.append(contentsOf: #","privateData":"#.utf8)
            JSONSerializer.writeObject(privateData, to: &line)
        }
        line.append(contentsOf: "}}".utf8)
        return String(decoding: line, as: UTF8.self)
    }

    /// A line's bytes up to its `data` value: `{`, the members event, topic, sourceId and
    /// correlationId, then `"data":`.
    private static func header(_ event: String, topic: CoatyTopic) -> [UInt8] {
        var line: [UInt8] = []
        line.reserveCapacity(topic.name.utf8.count + 512)
        line.append(contentsOf: #"{"event":"#.utf8)
        JSONSerializer.writeString(event, to: &line)
        line.append(contentsOf: #","topic":"#.utf8)
        JSONSerializer.writeString(topic.name, to: &line)
        // The ids are the topic's validated UUID text: nothing to escape.
        line.append(contentsOf: #","sourceId":""#.utf8)
        line.append(contentsOf: topic.sourceId.utf8)
        if let correlationId = topic.correlationId {
            line.append(contentsOf: #"","correlationId":""#.utf8)
            line.append(contentsOf: correlationId.utf8)
        }
        line.append(contentsOf: #"","data":"#.utf8)
        return line
    }

    /// The line of a Raw message: `data` is the payload as JSON when it is JSON, else as a
    /// string when it is UTF-8, else `dataBase64`.
    static func raw(_ event: RawEvent) -> String {
        var line = JSONObject()
        line["event"] = .string("Raw")
        line["topic"] = .string(event.topic)
        if event.retain { line["retain"] = .bool(true) }
        if let json = try? JSONValue(parsing: event.payload) {
            line["data"] = json
        } else if let text = String(validating: event.payload, as: UTF8.self) {
            line["data"] = .string(text)
        } else {
            line["dataBase64"] = .string(Data(event.payload).base64EncodedString())
        }
        return JSONValue.object(line).serializedString()
    }
}

/// A one-line form of any error (newlines folded), for stderr.
func oneLine(_ text: String) -> String {
    text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: " ")
}
