//! The onboarding as a service, on one SQLite file or a PostgreSQL server (`--db`): `register`
//! and `activate` users, `work` to run the welcome emails and the expiries, `serve` the
//! operator's page, and every operator's command (`onboarding --help`).

use std::process::ExitCode;
use std::sync::Arc;

use bounda::calendar::Zone;
use bounda::cli::{Service, ServiceArgs, ServiceCommand};
use bounda::store::Opening;
use clap::{Parser, Subcommand};
use onboarding::email::{ConsoleSender, RecordingSender};
use onboarding::user::{ActivateUser, Email, Name, RegisterUser, UserId};

#[derive(Parser)]
#[command(
    name = "onboarding",
    about = "Users register, get a welcome email a minute later, and have seven days to activate"
)]
struct Cli {
    #[command(flatten)]
    service: ServiceArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Registers a user and prints their id; `work` sends the welcome email.
    Register {
        /// Their address.
        email: String,
        /// Their name.
        name: String,
        /// Their time zone, an IANA name (`Europe/Paris`): their weekly digest goes Mondays at
        /// 08:00 there. UTC unless given.
        #[arg(long)]
        zone: Option<String>,
    },
    /// Activates the user with this id.
    Activate {
        /// The id `register` printed.
        user_id: String,
    },
    #[command(flatten)]
    Service(ServiceCommand),
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let _logging = bounda::cli::Logging::install("onboarding");
    let cli = Cli::parse();
    // `ONBOARDING_TIMEOUT`, read once: an invalid one is refused before anything runs.
    let timeout = match onboarding::onboarding_timeout() {
        Ok(timeout) => timeout,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    // `WELCOME_WEBHOOK_URL` and `WELCOME_WEBHOOK_SECRET`, read once, likewise.
    let webhook = match onboarding::welcome::welcome_webhook() {
        Ok(webhook) => webhook,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    let service = Service::new("onboarding", bounda_postgres::Servers(bounda_sqlite::Files))
        .app(move |builder| {
            let builder = onboarding::app(builder, Arc::new(ConsoleSender::from_env()), timeout);
            match &webhook {
                Some(sink) => builder.relay(onboarding::welcome::welcome_relay(sink.clone())),
                None => builder,
            }
        })
        .preview(move |builder, calls| {
            onboarding::app(builder, Arc::new(RecordingSender::new(calls)), timeout)
        });
    let result = match cli.command {
        Command::Service(command) => return service.run(&cli.service, command).await,
        Command::Register { email, name, zone } => {
            register(&service, &cli.service, &email, &name, zone.as_deref()).await
        }
        Command::Activate { user_id } => activate(&service, &cli.service, user_id).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// `register`: a new user, their id printed.
async fn register(
    service: &Service,
    args: &ServiceArgs,
    email: &str,
    name: &str,
    zone: Option<&str>,
) -> anyhow::Result<()> {
    let command = RegisterUser {
        user_id: UserId::random(),
        email: Email::parse(email)?,
        name: Name::parse(name)?,
        zone: zone.map(Zone::named).transpose()?,
    };
    let app = service.open(args, Opening::Create).await?;
    app.dispatch(command.clone()).await?;
    println!("{}", command.user_id.as_str());
    Ok(())
}

/// `activate`: the user activated, or why not.
async fn activate(service: &Service, args: &ServiceArgs, user_id: String) -> anyhow::Result<()> {
    let app = service.open(args, Opening::Existing).await?;
    app.dispatch(ActivateUser { user_id }).await?;
    println!("activated");
    Ok(())
}
