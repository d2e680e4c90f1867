import CMosquittoShim

/// The version of the linked libmosquitto, e.g. `2000011` for 2.0.11.
public var libmosquittoVersion: Int { Int(CMosquittoShim_libraryVersion()) }
